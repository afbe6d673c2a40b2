/* The receiver end of docs/flow-protocol.md: a 64-byte request, a 16-byte response, little-endian. */
#ifndef CELLAB_FLOWPROTO_H
#define CELLAB_FLOWPROTO_H

#include <stdint.h>

#define FLOWPROTO_REQ_BYTES 64
#define FLOWPROTO_RESP_BYTES 16
#define FLOWPROTO_DEFAULT_PORT 5301

enum flow_mode { FLOW_MODE_BYTES = 1, FLOW_MODE_MS = 2, FLOW_MODE_UNTIL_CLOSE = 3 };

void flowproto_encode_request(uint8_t out[FLOWPROTO_REQ_BYTES], int mode, uint64_t amount, const char *cc_name,
                              uint64_t flow_tag, uint32_t chunk_bytes);
/* 0 if the magic is right; status and flow id filled in. */
int flowproto_decode_response(const uint8_t in[FLOWPROTO_RESP_BYTES], uint16_t *status, uint64_t *flow_id);
const char *flowproto_status_text(uint16_t status);

#endif
