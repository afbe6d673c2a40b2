/* The walk over a TCP header's options (RFC 9293 §3.1), shared by cellab-flowstat and cellab-probe:
 * kind 0 ends the list, kind 1 is a byte of padding, every other kind has a length byte that counts
 * the kind and length bytes too. A malformed length ends the walk. */
#ifndef CELLAB_TCPOPT_H
#define CELLAB_TCPOPT_H

#include <stddef.h>
#include <stdint.h>

struct tcp_option {
    uint8_t kind;
    uint8_t len;          /* the whole option, kind and length bytes included */
    const uint8_t *data;  /* len - 2 bytes */
};

/* The option at *pos (skipping padding) into *out, advancing *pos; 0 at the end of the list. */
static inline int tcp_option_next(const uint8_t *opt, size_t len, size_t *pos, struct tcp_option *out)
{
    while (*pos < len) {
        uint8_t kind = opt[*pos];
        if (kind == 0)
            return 0;
        if (kind == 1) {
            (*pos)++;
            continue;
        }
        if (*pos + 1 >= len)
            return 0;
        uint8_t olen = opt[*pos + 1];
        if (olen < 2 || *pos + olen > len)
            return 0;
        out->kind = kind;
        out->len = olen;
        out->data = opt + *pos + 2;
        *pos += olen;
        return 1;
    }
    return 0;
}

#endif
