#include "flowproto.h"

#include <string.h>

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void flowproto_encode_request(uint8_t out[FLOWPROTO_REQ_BYTES], int mode, uint64_t amount, const char *cc_name,
                              uint64_t flow_tag, uint32_t chunk_bytes)
{
    memset(out, 0, FLOWPROTO_REQ_BYTES);
    memcpy(out, "CLB1", 4);
    put_le(out + 4, 1, 2);
    put_le(out + 6, (uint64_t)mode, 2);
    put_le(out + 8, mode == FLOW_MODE_UNTIL_CLOSE ? 0 : amount, 8);
    if (cc_name)
        strncpy((char *)out + 16, cc_name, 16); /* NUL-padded, not necessarily terminated */
    put_le(out + 32, flow_tag, 8);
    put_le(out + 40, chunk_bytes, 4);
}

int flowproto_decode_response(const uint8_t in[FLOWPROTO_RESP_BYTES], uint16_t *status, uint64_t *flow_id)
{
    if (memcmp(in, "CLB1", 4) != 0)
        return -1;
    *status = (uint16_t)get_le(in + 4, 2);
    *flow_id = get_le(in + 8, 8);
    return 0;
}

const char *flowproto_status_text(uint16_t status)
{
    switch (status) {
    case 0: return "ok";
    case 1: return "bad request";
    case 2: return "unknown congestion control";
    case 3: return "busy";
    }
    return "unknown status";
}
