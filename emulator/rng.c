/* cellab-cell: the model's random numbers (xorshift64*, one stream per seed, state in the context). */
#include "cell.h"

#include <math.h>

/* xorshift64*: reproducible per seed, state in the context. */
double rng_uniform(struct cell *c)
{
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return (double)((c->rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

double rng_normal(struct cell *c)
{
    double u1 = rng_uniform(c), u2 = rng_uniform(c);
    if (u1 < 1e-12)
        u1 = 1e-12;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
