# Sourced by the test scripts that start a server on a port of their own.
# free_port: prints a port below the kernel's ephemeral range (so that no
# connection's local port can take it between the check and the bind) that
# no TCP or UDP socket in this network namespace uses.
free_port() {
	fp_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	[ "$fp_low" -gt 11000 ] || fp_low=32768
	for _ in $(seq 100); do
		fp=$((10000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % (fp_low - 10000)))
		if ! ss -Htuan "( sport = :$fp )" 2>/dev/null | grep -q .; then
			echo "$fp"
			return
		fi
	done
	echo "$fp"
}
