// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
//
// burrow's kernel path: Ethernet-in-UDP tunnels for trusted links, without
// per-peer connection state and without encryption. The daemon keeps doing
// discovery and the control plane; it fills two maps and these programs do
// the rest:
//
//   kp_egress (TCX egress on the TAP): a unicast IPv4 or IPv6 frame the
//   host sends into the TAP whose destination MAC is in kp_macs is
//   encapsulated in IPv4/UDP to that entry's peer and the kernel-path port
//   and sent out of the underlay device; everything else goes on to the
//   daemon as before. GSO super-frames are encapsulated as they are
//   (SKB_GSO_UDP_TUNNEL): the underlay device, or the kernel's software
//   GSO in front of it, cuts them into segments.
//
//   kp_ingress (TCX ingress on each underlay device): a datagram to the
//   kernel-path port from an address in kp_peers is stripped of its outer
//   headers and handed to the TAP's receive path, so the host gets the
//   inner frame as if the daemon had written it; a 16-byte probe is
//   answered in place. Everything else goes on untouched.
//
// Wire format: [IPv4][UDP to kp_port][Ethernet frame], nothing else; the
// probe, which the daemon sends before it trusts the path, carries the
// version. Built with clang -O2 -g -target bpf (see runtime/kernelpath/gen.go).

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define OUTER_LEN (sizeof(struct iphdr) + sizeof(struct udphdr))  /* 28 */
#define ENCAP_LEN (OUTER_LEN + ETH_HLEN)                          /* 42 */

/* The probe: magic "BRWK", version, kind, reserved, balance, nonce. The
 * answer changes kind 1 to 2 and balance 1 to 0, which keeps the UDP
 * checksum valid whatever state the skb's checksum is in. */
#define PROBE_LEN 16
#define PROBE_MAGIC 0x4252574bU
#define PROBE_VERSION 1
#define PROBE_ASK 1
#define PROBE_ANSWER 2

/* Set by the loader before the programs are loaded. */
volatile const __u16 kp_port = 0;       /* the kernel-path UDP port, host order */
volatile const __u32 kp_tap_ifindex = 0; /* where decapsulated frames go */
volatile const __u32 kp_max_outer = 1500; /* largest outer IPv4 packet (underlay MTU) */

struct mac_key {
	__u8 addr[ETH_ALEN];
};

/* Where the frames for one MAC go: the peer's underlay address, this
 * node's address toward it, and the device the route to it leaves by. */
struct dest {
	__be32 daddr;
	__be32 saddr;
	__u32 ifindex;
	__u32 reserved;
};

struct stats {
	__u64 tx_packets;   /* frames (GSO super-frames count once) sent by the kernel path */
	__u64 tx_bytes;     /* their inner bytes */
	__u64 tx_daemon;    /* unicast frames to a kernel-path MAC left to the daemon: not IP, too big */
	__u64 tx_errors;    /* frames the kernel could not encapsulate, left to the daemon */
	__u64 rx_packets;   /* frames decapsulated into the TAP */
	__u64 rx_bytes;     /* their inner bytes */
	__u64 rx_probes;    /* probes answered */
	__u64 rx_untrusted; /* datagrams to the port from an address not in kp_peers, passed on */
	__u64 rx_errors;    /* malformed datagrams from peers, dropped */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct mac_key);
	__type(value, struct dest);
} kp_macs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __be32);
	__type(value, __u32);
} kp_peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stats);
} kp_stats SEC(".maps");

static __always_inline struct stats *stats(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&kp_stats, &zero);
}

static __always_inline __u16 ip_checksum(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < (int)(sizeof(*ip) / 2); i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

SEC("tcx/egress")
int kp_egress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct mac_key key;
	struct dest *d;
	struct stats *st;
	__u32 hash, len;

	if ((void *)(eth + 1) > data_end)
		return TC_ACT_UNSPEC;
	if (eth->h_dest[0] & 1) /* broadcast, multicast: Bounded Flood */
		return TC_ACT_UNSPEC;
	__builtin_memcpy(key.addr, eth->h_dest, ETH_ALEN);
	d = bpf_map_lookup_elem(&kp_macs, &key);
	if (!d)
		return TC_ACT_UNSPEC;
	st = stats();
	if (!st)
		return TC_ACT_UNSPEC;
	len = skb->len;
	/* bpf_skb_adjust_room encapsulates IPv4 and IPv6 only; ARP and the
	 * rest stay with the daemon. A frame too big for one datagram on the
	 * underlay too: only GSO frames are cut after encapsulation. */
	if ((eth->h_proto != bpf_htons(ETH_P_IP) && eth->h_proto != bpf_htons(ETH_P_IPV6)) ||
	    (skb->gso_size == 0 && len + OUTER_LEN > kp_max_outer)) {
		st->tx_daemon++;
		return TC_ACT_UNSPEC;
	}

	struct ethhdr inner = *eth;
	__be32 daddr = d->daddr, saddr = d->saddr;
	__u32 ifindex = d->ifindex;

	hash = bpf_get_hash_recalc(skb);
	if (bpf_skb_adjust_room(skb, ENCAP_LEN, BPF_ADJ_ROOM_MAC,
				BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 |
				BPF_F_ADJ_ROOM_ENCAP_L4_UDP | BPF_F_ADJ_ROOM_ENCAP_L2_ETH |
				BPF_F_ADJ_ROOM_ENCAP_L2(ETH_HLEN))) {
		st->tx_errors++;
		return TC_ACT_UNSPEC;
	}

	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	struct ethhdr *in = (void *)(udp + 1);
	if ((void *)(in + 1) > data_end) {
		/* The room is there but not in the linear part: cannot
		 * happen, adjust_room makes it so. Drop rather than send a
		 * frame with zeroed headers. */
		st->tx_errors++;
		return TC_ACT_SHOT;
	}

	/* The outer Ethernet addresses are filled in by the neighbour
	 * lookup of bpf_redirect_neigh; the destination must not look
	 * like multicast meanwhile. */
	__builtin_memset(eth, 0, 2 * ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);

	/* A GSO super-frame's lengths are set per segment when it is cut;
	 * until then they only have to be plausible. */
	__u32 outer = len - ETH_HLEN + ENCAP_LEN;
	if (outer > 0xffff)
		outer = 0xffff;
	ip->version = 4;
	ip->ihl = 5;
	ip->tos = 0;
	ip->tot_len = bpf_htons(outer);
	ip->id = 0;
	ip->frag_off = bpf_htons(0x4000); /* DF */
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->check = 0;
	ip->saddr = saddr;
	ip->daddr = daddr;
	ip->check = ip_checksum(ip);

	/* Source port from the flow hash, so that the underlay's ECMP and
	 * RSS spread flows; no UDP checksum, as IPv4 allows: the inner
	 * frame carries its own. */
	udp->source = bpf_htons(49152 | (hash & 0x3fff));
	udp->dest = bpf_htons(kp_port);
	udp->len = bpf_htons(outer - sizeof(struct iphdr));
	udp->check = 0;
	*in = inner;

	st->tx_packets++;
	st->tx_bytes += len;
	return bpf_redirect_neigh(ifindex, NULL, 0, 0);
}

/* answer turns a probe around: addresses and ports swapped, kind and
 * balance changed so that both checksums stay what they were, and out of
 * the device it came in by. */
static __always_inline int answer(struct __sk_buff *skb, struct stats *st)
{
	void *data, *data_end;

	if (bpf_skb_pull_data(skb, ETH_HLEN + OUTER_LEN + PROBE_LEN))
		return TC_ACT_SHOT;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	__u8 *p = (void *)(udp + 1);
	if ((void *)(p + PROBE_LEN) > data_end)
		return TC_ACT_SHOT;
	if (((__u32)p[0] << 24 | (__u32)p[1] << 16 | (__u32)p[2] << 8 | p[3]) != PROBE_MAGIC ||
	    p[4] != PROBE_VERSION || p[5] != PROBE_ASK || p[7] != 1) {
		st->rx_errors++;
		return TC_ACT_SHOT;
	}
	p[5] = PROBE_ANSWER;
	p[7] = 0;

	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	__be32 a = ip->saddr;
	ip->saddr = ip->daddr;
	ip->daddr = a;
	__be16 port = udp->source;
	udp->source = udp->dest;
	udp->dest = port;

	st->rx_probes++;
	return bpf_redirect(skb->ifindex, 0);
}

SEC("tcx/ingress")
int kp_ingress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct stats *st;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_UNSPEC;
	if (data + ETH_HLEN + OUTER_LEN > data_end) {
		if (skb->len < ETH_HLEN + OUTER_LEN || bpf_skb_pull_data(skb, ETH_HLEN + OUTER_LEN))
			return TC_ACT_UNSPEC;
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
		eth = data;
		if (data + ETH_HLEN + OUTER_LEN > data_end)
			return TC_ACT_UNSPEC;
	}
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	if (ip->ihl != 5 || ip->protocol != IPPROTO_UDP || (ip->frag_off & bpf_htons(0x3fff)) ||
	    udp->dest != bpf_htons(kp_port))
		return TC_ACT_UNSPEC;

	st = stats();
	if (!st)
		return TC_ACT_UNSPEC;
	__be32 saddr = ip->saddr;
	if (!bpf_map_lookup_elem(&kp_peers, &saddr)) {
		st->rx_untrusted++;
		return TC_ACT_UNSPEC;
	}
	__u32 len = skb->len - ETH_HLEN - OUTER_LEN;
	if (len == PROBE_LEN)
		return answer(skb, st);
	if (len < ETH_HLEN + sizeof(struct iphdr)) {
		st->rx_errors++;
		return TC_ACT_SHOT;
	}

	if (bpf_skb_pull_data(skb, ENCAP_LEN + ETH_HLEN)) {
		st->rx_errors++;
		return TC_ACT_SHOT;
	}
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	struct ethhdr *in = data + ENCAP_LEN;
	if ((void *)(in + 1) > data_end) {
		st->rx_errors++;
		return TC_ACT_SHOT;
	}
	/* Only unicast IP: broadcasts travel as Bounded Flood, and the
	 * sending program encapsulates nothing else. */
	if ((in->h_dest[0] & 1) ||
	    (in->h_proto != bpf_htons(ETH_P_IP) && in->h_proto != bpf_htons(ETH_P_IPV6))) {
		st->rx_errors++;
		return TC_ACT_SHOT;
	}
	struct ethhdr inner = *in;

	/* Remove outer IPv4, UDP and the inner Ethernet header behind the
	 * outer one, then write the inner one over the outer: the fewest
	 * bytes moved. FIXED_GSO keeps the inner MSS of a GSO frame. */
	if (bpf_skb_adjust_room(skb, -(__s32)ENCAP_LEN, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_FIXED_GSO) ||
	    bpf_skb_store_bytes(skb, 0, &inner, ETH_HLEN, 0)) {
		st->rx_errors++;
		return TC_ACT_SHOT;
	}
	st->rx_packets++;
	st->rx_bytes += len;
	return bpf_redirect(kp_tap_ifindex, BPF_F_INGRESS);
}
