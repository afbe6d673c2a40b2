/* The cell's ground-truth log: a header, then one fixed-size record per UE per TTI (little-endian).
 * emulator/ttilog.py reads it; emulator/README.md documents every field. */
#ifndef CELLAB_TTILOG_H
#define CELLAB_TTILOG_H

#include <stdint.h>

#define TTILOG_MAGIC {'C', 'L', 'C', 'E', 'L', 'L', 'T', 'T'}
#define TTILOG_VERSION 2 /* 2: dl_capacity_bytes in the former reserved field */

enum ttilog_flags {
    TTILOG_SR_OCCASION = 1 << 0, /* this TTI is one of the UE's SR occasions */
    TTILOG_SR_SENT = 1 << 1,     /* the UE sent an SR */
    TTILOG_UL_GRANT = 1 << 2,    /* the eNB issued an uplink grant */
    TTILOG_PUSCH = 1 << 3,       /* the UE transmitted on PUSCH */
    TTILOG_HARQ_LOST = 1 << 4,   /* a downlink TB failed its last HARQ transmission */
    TTILOG_PAUSED = 1 << 5,      /* the cell was paused over the control socket */
    TTILOG_DL_DISCARD = 1 << 6,  /* the PDCP discard timer removed downlink packets (in dl_drop_bytes) */
    TTILOG_NOT_CONNECTED = 1 << 7, /* --rlf: the UE is out of RRC connected mode (rrc.c) */
};

struct __attribute__((packed)) ttilog_header {
    char magic[8];
    uint16_t version;
    uint16_t rec_size;
    uint16_t n_ues;
    uint16_t n_prb;
    uint32_t reserved;
    int64_t start_unix_s;
};

struct __attribute__((packed)) ttilog_rec {
    uint32_t tti;
    uint16_t ue;
    uint8_t cqi;                 /* CQI the scheduler used (last report after its delay) */
    uint8_t mcs;                 /* MCS of the new TB this TTI, 255 = none */
    uint32_t dl_queue_bytes;     /* RLC queue after this TTI (bytes not yet delivered) */
    uint32_t dl_tbs_bits;        /* TB bits sent (new + retransmissions); trace mode: capacity */
    uint32_t dl_delivered_bytes; /* IP bytes handed to the UE */
    uint32_t ul_buffer_bytes;    /* UE uplink buffer */
    uint32_t ul_grant_bytes;     /* grant used on PUSCH this TTI */
    uint32_t ul_delivered_bytes; /* IP bytes that completed on PUSCH */
    uint32_t dl_drop_bytes;      /* bytes dropped: RLC queue full, or PDCP discard timer */
    uint16_t dl_prb;             /* PRBs given to the UE */
    uint8_t harq_retx;           /* HARQ retransmissions sent */
    uint8_t flags;               /* enum ttilog_flags */
    int16_t sinr_db_x100;        /* true SINR this TTI */
    uint16_t dl_capacity_bytes;  /* ground truth: the largest TB, in bytes, of the whole cell at this CQI (trace: the trace's),
                                    0 when paused, out of range or unlimited; saturates at 65535 */
};

#endif
