/* Request/response encoding of docs/flow-protocol.md. */
#include <ctype.h>
#include <string.h>

#include "proto.h"

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

const char *flow_request_decode(const uint8_t in[FLOW_REQ_BYTES], struct flow_request *req)
{
	int ended = 0;

	memset(req, 0, sizeof(*req));
	if (memcmp(in, "CLB1", 4) != 0)
		return "magic is not CLB1";
	req->version = (uint16_t)get_le(in + 4, 2);
	req->mode = (uint16_t)get_le(in + 6, 2);
	req->amount = get_le(in + 8, 8);
	req->flow_tag = get_le(in + 32, 8);
	req->chunk_bytes = (uint32_t)get_le(in + 40, 4);
	if (req->version != 1)
		return "version is not 1";
	if (req->mode < MODE_BYTES || req->mode > MODE_UNTIL_CLOSE)
		return "mode is not 1, 2 or 3";
	if ((req->mode == MODE_BYTES || req->mode == MODE_TIME_MS) && req->amount == 0)
		return "amount must be > 0 in modes 1 and 2";
	if (req->mode == MODE_UNTIL_CLOSE && req->amount != 0)
		return "amount must be 0 in mode 3";
	if (req->chunk_bytes > FLOW_MAX_CHUNK_BYTES)
		return "chunk_bytes above 4 MiB";
	/* cc_name: printable ASCII, NUL-padded */
	for (int i = 0; i < FLOW_CC_NAME_BYTES; i++) {
		uint8_t ch = in[16 + i];

		if (ch == 0) {
			ended = 1;
			continue;
		}
		if (ended || !isgraph(ch))
			return "cc_name is not NUL-padded printable ASCII";
		req->cc_name[i] = (char)ch;
	}
	if (!ended)
		return "cc_name has no terminating NUL (at most 15 characters)";
	if (req->chunk_bytes == 0)
		req->chunk_bytes = FLOW_DEFAULT_CHUNK_BYTES;
	return NULL;
}

void flow_response_encode(uint8_t out[FLOW_RESP_BYTES], uint16_t status, uint64_t flow_id)
{
	memset(out, 0, FLOW_RESP_BYTES);
	memcpy(out, "CLB1", 4);
	put_le(out + 4, status, 2);
	put_le(out + 8, flow_id, 8);
}
