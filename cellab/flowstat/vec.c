#include "vec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *xrealloc(void *p, size_t bytes)
{
    void *q = realloc(p, bytes ? bytes : 1);
    if (q == NULL) {
        fprintf(stderr, "cellab-flowstat: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return q;
}

void dvec_push(struct dvec *a, double x)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 64;
        a->v = xrealloc(a->v, a->cap * sizeof(*a->v));
    }
    a->v[a->n++] = x;
}

void dvec_free(struct dvec *a)
{
    free(a->v);
    memset(a, 0, sizeof(*a));
}

void u64vec_grow_to(struct u64vec *a, size_t n)
{
    if (n <= a->n)
        return;
    if (n > a->cap) {
        size_t cap = a->cap ? a->cap : 16;
        while (cap < n)
            cap *= 2;
        a->v = xrealloc(a->v, cap * sizeof(*a->v));
        a->cap = cap;
    }
    memset(a->v + a->n, 0, (n - a->n) * sizeof(*a->v));
    a->n = n;
}

void u64vec_free(struct u64vec *a)
{
    free(a->v);
    memset(a, 0, sizeof(*a));
}

double mean_of(const double *v, size_t n)
{
    if (n == 0)
        return NAN;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    return sum / (double)n;
}

double min_of(const double *v, size_t n)
{
    double m = n ? v[0] : NAN;
    for (size_t i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

double max_of(const double *v, size_t n)
{
    double m = n ? v[0] : NAN;
    for (size_t i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

void abs_diff_sum(const double *v, size_t n, double *sum, size_t *pairs)
{
    for (size_t i = 1; i < n; i++)
        *sum += fabs(v[i] - v[i - 1]);
    *pairs += n > 1 ? n - 1 : 0;
}

static void swap_d(double *a, double *b)
{
    double t = *a;
    *a = *b;
    *b = t;
}

/* Hoare-style quickselect: afterwards v[k] is the k-th smallest, smaller ones before it. */
static void select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                swap_d(&v[i], &v[j]);
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return;
    }
}

double percentile_inplace(double *scratch, size_t n, double q)
{
    if (n == 0)
        return NAN;
    double pos = q * (double)(n - 1);
    size_t k = (size_t)pos;
    double frac = pos - (double)k;
    select_kth(scratch, n, k);
    double lo = scratch[k];
    if (frac == 0 || k + 1 >= n)
        return lo;
    double hi = min_of(scratch + k + 1, n - k - 1);   /* the next order statistic */
    return lo + frac * (hi - lo);
}

double percentile_of(const double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    double *copy = xrealloc(NULL, n * sizeof(*copy));
    memcpy(copy, v, n * sizeof(*copy));
    double p = percentile_inplace(copy, n, q);
    free(copy);
    return p;
}

size_t downsample_index(size_t i, size_t n, size_t points)
{
    return (size_t)((unsigned long long)i * n / points);
}
