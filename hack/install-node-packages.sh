#!/usr/bin/env bash
# The distribution's packages the local node and the image build need, from
# Debian's archive (installed once; a no-op when all are present). Needs root.
#   containerd, runc, containernetworking-plugins  the container runtime and CNI
#   iptables, conntrack                            kube-proxy's service rules
#   buildah, mmdebstrap                            images without Docker or a registry
#   patroni                                        PostgreSQL failover in the fault suite (e2e/faults/test_failover.py)
set -euo pipefail
PACKAGES=(containerd runc containernetworking-plugins iptables conntrack buildah mmdebstrap patroni)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-node-packages: run as root, or: apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "[install-node-packages] apt-get install ${missing[*]}" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
