#!/bin/sh
# Installs the servers the comparison starts itself (etcd, ZooKeeper with a
# Java runtime, Redis) from Debian's packages, and stops any system-wide
# instances the packages start, so that ports and CPU are not shared.
set -eu
need=""
[ -x /usr/bin/etcd ] || need="$need etcd-server"
[ -f /usr/share/java/zookeeper.jar ] || need="$need zookeeper"
[ -x /usr/bin/java ] || need="$need default-jre-headless"
[ -x /usr/bin/redis-server ] || need="$need redis-server"
if [ -n "$need" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup.sh: needs root to run: apt-get install -y$need" >&2
		exit 1
	fi
	apt-get update -q
	# policy-rc.d exit 101 keeps the packages from starting their services.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need
fi
# Stop system-wide instances, if a service manager started any.
for svc in etcd zookeeper redis-server; do
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
		systemctl stop "$svc" || true
		systemctl disable "$svc" 2>/dev/null || true
	elif command -v service >/dev/null 2>&1 && [ -x "/etc/init.d/$svc" ]; then
		service "$svc" stop >/dev/null 2>&1 || true
	fi
done
echo "setup.sh: etcd, ZooKeeper, Java and Redis are installed; run: go run ."
