/* The cellab flow protocol (docs/flow-protocol.md): fixed-size little-endian request and response. */
#ifndef CELLAB_SEND_PROTO_H
#define CELLAB_SEND_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define FLOW_REQ_BYTES 64
#define FLOW_RESP_BYTES 16
#define FLOW_BLOCK_BYTES 1024       /* every block of the payload starts with a send timestamp */
#define FLOW_DEFAULT_PORT 5301
#define FLOW_DEFAULT_CHUNK_BYTES 65536
#define FLOW_MAX_CHUNK_BYTES (4u << 20)
#define FLOW_CC_NAME_BYTES 16

enum flow_mode { MODE_BYTES = 1, MODE_TIME_MS = 2, MODE_UNTIL_CLOSE = 3 };
enum flow_status { STATUS_OK = 0, STATUS_BAD_REQUEST = 1, STATUS_UNKNOWN_CC = 2, STATUS_BUSY = 3 };

struct flow_request {
	uint16_t version;
	uint16_t mode;
	uint64_t amount;
	char cc_name[FLOW_CC_NAME_BYTES + 1];
	uint64_t flow_tag;
	uint32_t chunk_bytes;
};

/* 0 when valid; else a static reason (the status to answer is STATUS_BAD_REQUEST). */
const char *flow_request_decode(const uint8_t in[FLOW_REQ_BYTES], struct flow_request *req);
void flow_response_encode(uint8_t out[FLOW_RESP_BYTES], uint16_t status, uint64_t flow_id);

#endif
