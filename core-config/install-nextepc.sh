#!/bin/bash
# Install Debian's NextEPC packages without starting their services (idempotent).
# The packages ship systemd units with Restart=always; started without a database they would restart
# forever, so service starts are refused during the install (policy-rc.d) and the units are disabled.
set -euo pipefail
missing=()
for pkg in "$@"; do
    dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q '^install ok installed' || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then echo "install-nextepc: need root to apt-get install ${missing[*]}" >&2; exit 1; fi
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && own_policy=1
    trap '[ $own_policy = 1 ] && rm -f "$policy"' EXIT
fi
echo "installing Debian packages: ${missing[*]} (services not started)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
if [ -d /run/systemd/system ]; then
    for pkg in "${missing[@]}"; do systemctl disable --now "$pkg.service" >/dev/null 2>&1 || true; done
fi
