#!/bin/bash
# Random loss of incoming UDP in one namespace, with nftables.
#
#   loss.sh NS PCT       drop PCT percent of the UDP datagrams arriving in NS
#                        (PCT: 0..100, at most one decimal, e.g. 5 or 0.5)
#   loss.sh NS off       remove the rule
#   loss.sh NS status    the rule and its counter
#
# The rule sits in table `inet rfloss`, chain pre (hook prerouting):
#   meta l4proto udp numgen random mod 1000 < PCT*10 counter drop
# It sees IP packets as they arrive: a UDP datagram larger than the MTU
# comes in fragments, each dropped on its own (nothing in these namespaces
# loads conntrack, so there is no reassembly before the hook).
# Only UDP; TCP and ICMP pass. Each call replaces the previous rule.
set -u
ns=${1:?usage: loss.sh NS PCT|off|status}
what=${2:?usage: loss.sh NS PCT|off|status}
die() { echo "loss.sh: $*" >&2; exit 1; }
[ -e "/var/run/netns/$ns" ] || die "no namespace $ns"
command -v nft >/dev/null || die "nft not found (Debian package nftables)"
nsnft() { ip netns exec "$ns" nft "$@"; }
drop_table() { nsnft list table inet rfloss >/dev/null 2>&1 && nsnft delete table inet rfloss; return 0; }

case $what in
off) drop_table; echo "loss: $ns off" ;;
status)
	if nsnft list table inet rfloss >/dev/null 2>&1; then
		echo "loss: $ns: $(nsnft list chain inet rfloss pre | grep -o 'numgen.*')"
	else
		echo "loss: $ns off"
	fi ;;
*)
	# PCT with at most one decimal, as per mille
	[[ $what =~ ^([0-9]{1,3})(\.([0-9]))?$ ]] || die "PCT must be a number 0..100 with at most one decimal, not '$what'"
	pm=$((10#${BASH_REMATCH[1]} * 10 + 10#${BASH_REMATCH[3]:-0}))
	[ $pm -le 1000 ] || die "PCT over 100"
	drop_table
	nsnft -f - <<-EOF || die "nft failed"
	table inet rfloss {
		chain pre {
			type filter hook prerouting priority raw; policy accept;
			meta l4proto udp numgen random mod 1000 < $pm counter drop
		}
	}
	EOF
	echo "loss: $ns drops $what% of incoming UDP"
	;;
esac
