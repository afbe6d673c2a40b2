/* A stand-in for the Vaunix Lab Brick LDA SDK (libLDAhid / VNX_atten), built by the tests.
 * Same function names and calling conventions as the SDK; one simulated device.
 * Variants: -DWITH_HR (HR calls, 0.05 dB counts), -DLINUX_SDK (exports fnLDA_GetLibVersion,
 * legacy calls in 0.05 dB), neither (Windows-style DLL: fnLDA_GetDLLVersion, legacy 0.25 dB). */
#include <stdbool.h>
#include <string.h>

#define STATUS_OK 0
#define BAD_PARAMETER 0x80010000
#define DEVICE_NOT_READY 0x80030000
#define INVALID_DEVID 0x80000000

#if defined(WITH_HR) || defined(LINUX_SDK)
#define LEGACY_PER_DB 20 /* 0.05 dB counts */
#else
#define LEGACY_PER_DB 4 /* 0.25 dB counts */
#endif

#define CHANNELS 4
#define MAX_HR (95 * 20) /* 95 dB in 0.05 dB counts */

typedef unsigned int DEVID;

/* One simulated device; the SDK itself keeps such a table, so tests can inspect it. */
static struct {
    bool test_mode, opened;
    int channel;
    int att_hr[CHANNELS]; /* always kept in 0.05 dB counts */
    int set_calls;
} dev = {.channel = 1};

void fnLDA_SetTestMode(bool mode) { dev.test_mode = mode; }
int fnLDA_GetNumDevices(void) { return 1; }
int fnLDA_GetDevInfo(DEVID *ids) { ids[0] = 1; return 1; }
int fnLDA_GetSerialNumber(DEVID id) { return id == 1 ? 24680 : 0; }
int fnLDA_InitDevice(DEVID id) { if (id != 1) return (int)INVALID_DEVID; dev.opened = true; return STATUS_OK; }
int fnLDA_CloseDevice(DEVID id) { if (id != 1) return (int)INVALID_DEVID; dev.opened = false; return STATUS_OK; }
int fnLDA_GetModelName(DEVID id, char *name) { (void)id; strcpy(name, "LDA-5018V"); return 9; }
#ifdef LINUX_SDK
int fnLDA_GetLibVersion(void) { return 0x0105; }
#else
int fnLDA_GetDLLVersion(void) { return 0x0203; }
#endif

int fnLDA_SetChannel(DEVID id, int ch) {
    if (id != 1 || !dev.opened) return (int)DEVICE_NOT_READY;
    if (ch < 1 || ch > CHANNELS) return (int)BAD_PARAMETER;
    dev.channel = ch;
    return STATUS_OK;
}

static int set_hr(DEVID id, int hr) {
    if (id != 1 || !dev.opened) return (int)DEVICE_NOT_READY;
    if (hr < 0 || hr > MAX_HR) return (int)BAD_PARAMETER;
    dev.att_hr[dev.channel - 1] = hr;
    dev.set_calls++;
    return STATUS_OK;
}

int fnLDA_SetAttenuation(DEVID id, int att) { return set_hr(id, att * 20 / LEGACY_PER_DB); }
int fnLDA_GetAttenuation(DEVID id) {
    if (id != 1 || !dev.opened) return (int)DEVICE_NOT_READY;
    return dev.att_hr[dev.channel - 1] * LEGACY_PER_DB / 20;
}
int fnLDA_GetMaxAttenuation(DEVID id) { (void)id; return MAX_HR * LEGACY_PER_DB / 20; }
#ifdef WITH_HR
int fnLDA_SetAttenuationHR(DEVID id, int att) { return set_hr(id, att); }
int fnLDA_GetAttenuationHR(DEVID id) {
    if (id != 1 || !dev.opened) return (int)DEVICE_NOT_READY;
    return dev.att_hr[dev.channel - 1];
}
int fnLDA_GetMaxAttenuationHR(DEVID id) { (void)id; return MAX_HR; }
#endif

/* test hook: raw state in 0.05 dB counts */
int fake_att_hr(int ch) { return dev.att_hr[ch - 1]; }
