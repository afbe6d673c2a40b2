"""A stand-in srsenb for agent tests: reads the rendered rr.conf (libconf) like srsenb, prints srsenb's ready
line, writes the JSON report (a banner, then pretty-printed concatenated objects) with one UE whose
RRCConnectionSetup carries the sr-ConfigIndex of the configured SR period (offset 0, as srsENB gives the
first UE), and echoes stdin commands to the console. `FAKE_SRSENB_ERROR=line` exits with that line;
`FAKE_SRSENB_UES=n` reports n connected UEs (RNTIs 70, 71, ...) in its metrics. Its PHY log (enb.log) gets
srsenb's PUCCH lines at each SR occasion of RNTI 70, with sr=yes at every third, split as srslog's file sink
splits it with enb.conf's `[log] file_max_size` (KiB): the line that reaches the size opens enb.N.log."""

import json
import os
import sys
import threading
import time

import libconf

conf_dir = os.path.dirname(os.path.abspath(sys.argv[1]))
if os.environ.get("FAKE_SRSENB_ERROR"):
    print("---  Software Radio Systems LTE eNodeB  ---", flush=True)
    print(os.environ["FAKE_SRSENB_ERROR"], flush=True)
    sys.exit(255)
with open(os.path.join(conf_dir, "rr.conf")) as f:
    rr = libconf.load(f)
period = rr["phy_cnfg"]["sched_request_cnfg"]["period"]
first_index = {5: 0, 10: 5, 20: 15, 40: 35, 80: 75}[period]
print("==== eNodeB started ===", flush=True)


def stdin_echo():
    for line in sys.stdin:
        print(f"stdin: {line.strip()}", flush=True)


threading.Thread(target=stdin_echo, daemon=True).start()
report = open(os.path.join(conf_dir, "enb_report.json"), "w")
report.write("Software Radio Systems RAN (srsRAN) fake\n")
asn1 = json.dumps([{"DL-CCCH-Message": {"message": {"c1": {"rrcConnectionSetup": {"physicalConfigDedicated": {
    "schedulingRequestConfig": {"setup": {"sr-ConfigIndex": first_index}}}}}}}}])
objs = [{"type": "event", "timestamp": time.time(), "event_name": "rrc_log",
         "event_data": {"rnti": 70, "asn1_message": asn1}}]
rntis = range(70, 70 + int(os.environ.get("FAKE_SRSENB_UES", "1")))


class SplitLog:
    def __init__(self, path, max_kib):
        self.stem, self.ext = os.path.splitext(path)
        self.max_bytes, self.index, self.size = max(max_kib, 0) * 1024, 0, 0
        self.out = open(path, "w")

    def write(self, line):
        self.size += len(line)
        if self.max_bytes and self.size >= self.max_bytes:
            self.out.close()
            self.index, self.size = self.index + 1, len(line)
            self.out = open(f"{self.stem}.{self.index}{self.ext}", "w")
        self.out.write(line)

    def flush(self):
        self.out.flush()


with open(os.path.join(conf_dir, "enb.conf")) as f:
    in_log, max_kib = False, -1
    for conf_line in f:
        if conf_line.strip().startswith("["):
            in_log = conf_line.strip() == "[log]"
        elif in_log and conf_line.split("=")[0].strip() == "file_max_size":
            max_kib = int(conf_line.split("=")[1])
phy_log = SplitLog(os.path.join(conf_dir, "enb.log"), max_kib)
for i in range(1000):
    for k in range(200 // period):  # 200 ms of SR occasions per loop, at the TTI clock
        tti = (i * 200 + k * period) % 10240
        t = time.time() + k * period / 1000
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}"
        phy_log.write(f"{stamp} [PHY0   ] [I] [{tti:5d}] PUCCH: cc=0; rnti=0x46, f=1, n_pucch=0, "
                      f"dmrs_corr=0.990, snr=30.0 dB, corr=0.990, sr={'yes' if k % 3 == 0 else 'no'}, ta=0.0 us\n")
    phy_log.flush()
    objs.append({"type": "metrics", "timestamp": time.time(), "cell_list": [{"cell_container": {
        "carrier_id": 0, "pci": 1, "ue_list": [{"ue_container": {"ue_rnti": rnti, "dl_cqi": 15.0,
                                                                 "dl_bitrate": 1000.0 * i, "ul_bsr": i,
                                                                 "bearer_list": []}} for rnti in rntis]}}]})
    for obj in objs:
        report.write(json.dumps(obj, indent=2) + "\n")
    report.flush()
    objs = []
    time.sleep(0.2)
