/* Growable arrays and the statistics flowstat needs (mean, percentile, downsampling). */
#ifndef FLOWSTAT_VEC_H
#define FLOWSTAT_VEC_H

#include <stddef.h>
#include <stdint.h>

struct dvec {
    double *v;
    size_t n, cap;
};

struct u64vec {
    uint64_t *v;
    size_t n, cap;
};

void *xrealloc(void *p, size_t bytes);   /* exits with a message when memory runs out */
void dvec_push(struct dvec *a, double x);
void dvec_free(struct dvec *a);
void u64vec_grow_to(struct u64vec *a, size_t n);   /* new elements are zero */
void u64vec_free(struct u64vec *a);

double mean_of(const double *v, size_t n);
double min_of(const double *v, size_t n);
double max_of(const double *v, size_t n);
/* Mean |v[i] - v[i-1]| summed into *sum, with the number of pairs added to *pairs. */
void abs_diff_sum(const double *v, size_t n, double *sum, size_t *pairs);
/* Linear-interpolated percentile (numpy's default), q in [0, 1]; reorders scratch (n values). */
double percentile_inplace(double *scratch, size_t n, double q);
double percentile_of(const double *v, size_t n, double q);   /* copies, then as above */
/* Index of the i-th of `points` evenly spread picks from n items (n > points). */
size_t downsample_index(size_t i, size_t n, size_t points);

#endif
