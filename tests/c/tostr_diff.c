/* Prints fi_tostr / fi_tostr_r / fi_strerror output for many values, one
 * "== name" header per case, so that two libraries' outputs can be compared
 * case by case (see tostr_diff.sh). Builds against the 1.x headers and uses
 * only values those headers define, plus bits and numbers nobody defines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_collective.h>

static void show(const char *name, const void *data, enum fi_type t)
{
	char *s = fi_tostr(data, t);
	printf("== %s\n%s\n", name, s ? s : "<NULL>");
}

#define SHOW(name, val, t) do { __typeof__(val) v_ = (val); show(name, &v_, t); } while (0)

static const uint64_t flag_sets[] = {
	0, FI_MSG, FI_MSG | FI_TAGGED | FI_SEND | FI_RECV, FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE,
	FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV | FI_REMOTE_CQ_DATA,
	FI_TRIGGER | FI_FENCE | FI_COLLECTIVE | FI_MULTICAST, FI_HMEM | FI_SOURCE | FI_SOURCE_ERR,
	FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV | FI_RMA_EVENT | FI_NAMED_RX_CTX,
	FI_DIRECTED_RECV | FI_VARIABLE_MSG | FI_RMA_PMEM,
	FI_INJECT | FI_COMPLETION | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE,
	FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE | FI_AFFINITY | FI_CLAIM | FI_DISCARD,
	FI_MORE | FI_PEEK, FI_CONTEXT | FI_MSG_PREFIX | FI_ASYNC_IOV | FI_RX_CQ_DATA,
	FI_LOCAL_MR | FI_NOTIFY_FLAGS_ONLY | FI_RESTRICTED_COMP | FI_CONTEXT2 | FI_BUFFERED_RECV,
	FI_ORDER_RAR | FI_ORDER_WAW | FI_ORDER_SAS | FI_ORDER_RMA_RAW | FI_ORDER_ATOMIC_WAW,
	FI_ORDER_STRICT, FI_ORDER_DATA, FI_ORDER_STRICT | FI_ORDER_DATA,
	/* bits neither library names (kept clear of the 2.x additions) */
	(1ULL << 14) | (1ULL << 15), 1ULL << 62, ~0ULL & ~((1ULL << 41) | (1ULL << 43) | (1ULL << 44)),
};

static void fill_info(struct fi_info *info, int variant)
{
	static struct sockaddr_in sin;
	static struct sockaddr_in6 sin6;
	static char str_addr[] = "fi_addr_str://some/where";
	info->caps = flag_sets[variant % 20];
	info->mode = FI_CONTEXT | (variant ? FI_LOCAL_MR : 0);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(7000 + variant);
	inet_pton(AF_INET, "10.1.2.3", &sin.sin_addr);
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(1234);
	inet_pton(AF_INET6, variant == 2 ? "::ffff:1.2.3.4" : "fe80::1:2", &sin6.sin6_addr);
	switch (variant) {
	case 0: break;
	case 1: info->addr_format = FI_SOCKADDR_IN; info->src_addr = &sin; info->src_addrlen = sizeof sin; break;
	case 2: info->addr_format = FI_SOCKADDR_IN6; info->dest_addr = &sin6; info->dest_addrlen = sizeof sin6; break;
	case 3: info->addr_format = FI_SOCKADDR; info->src_addr = &sin6; info->dest_addr = &sin; break;
	case 4: info->addr_format = FI_ADDR_STR; info->src_addr = str_addr; break;
	default: info->addr_format = 0x80000007u; break;
	}
}

/* More than any attribute struct grew between 1.17 and the current API. */
#define ATTR_PAD 256

static struct fi_info *make_info(int variant)
{
	struct fi_info *info = calloc(1, sizeof *info);
	fill_info(info, variant);
	if (variant == 0)
		return info; /* every attribute pointer NULL */
	/* Built against 1.17's headers, run on a 2.x library: fi_tostr reads
	 * the attribute structs in the current layout, which is larger than
	 * 1.17's (upstream's 2.x fi_tostr does the same). Blocks from
	 * fi_getinfo/fi_dupinfo are zero-padded to that size; these are too. */
	info->tx_attr = calloc(1, sizeof *info->tx_attr + ATTR_PAD);
	info->rx_attr = calloc(1, sizeof *info->rx_attr + ATTR_PAD);
	info->ep_attr = calloc(1, sizeof *info->ep_attr + ATTR_PAD);
	info->domain_attr = calloc(1, sizeof *info->domain_attr + ATTR_PAD);
	info->fabric_attr = calloc(1, sizeof *info->fabric_attr + ATTR_PAD);
	info->tx_attr->caps = FI_MSG | FI_SEND;
	info->tx_attr->op_flags = FI_COMPLETION | FI_TRANSMIT_COMPLETE;
	info->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_RAW;
	info->tx_attr->comp_order = variant == 1 ? FI_ORDER_STRICT : FI_ORDER_DATA;
	info->tx_attr->inject_size = 4096; info->tx_attr->size = 1024;
	info->tx_attr->iov_limit = 4; info->tx_attr->rma_iov_limit = 1;
	info->tx_attr->tclass = variant * 3;
	info->rx_attr->caps = FI_RECV | FI_MULTI_RECV; info->rx_attr->mode = FI_RX_CQ_DATA;
	info->rx_attr->total_buffered_recv = 65536; info->rx_attr->size = (size_t)-2;
	info->rx_attr->comp_order = FI_ORDER_NONE;
	info->ep_attr->type = variant == 3 ? FI_EP_SOCK_STREAM : FI_EP_RDM;
	info->ep_attr->protocol = variant == 4 ? 0x80000003u : FI_PROTO_SHM;
	info->ep_attr->protocol_version = variant == 2 ? -1 : 1;
	info->ep_attr->max_msg_size = SIZE_MAX; info->ep_attr->mem_tag_format = 0xAAAA5555;
	info->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT; info->ep_attr->rx_ctx_cnt = 1;
	info->ep_attr->auth_key_size = 8;
	info->domain_attr->domain = (void *)(uintptr_t)0x123456789abcULL;
	info->domain_attr->name = variant == 2 ? NULL : strdup("shm-domain");
	info->domain_attr->threading = FI_THREAD_DOMAIN;
	info->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	info->domain_attr->data_progress = variant == 3 ? 99 : FI_PROGRESS_AUTO;
	info->domain_attr->resource_mgmt = FI_RM_ENABLED;
	info->domain_attr->av_type = FI_AV_TABLE;
	info->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_HMEM;
	info->domain_attr->mr_key_size = 8; info->domain_attr->cq_data_size = 8;
	info->domain_attr->cq_cnt = 1024; info->domain_attr->ep_cnt = 256;
	info->domain_attr->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
	info->domain_attr->mode = FI_CONTEXT2; info->domain_attr->mr_cnt = 77;
	info->domain_attr->tclass = 0x10;
	info->fabric_attr->name = strdup("shm");
	info->fabric_attr->prov_name = variant == 4 ? NULL : strdup("shm");
	info->fabric_attr->prov_version = FI_VERSION(117, 3);
	info->fabric_attr->api_version = FI_VERSION(1, 17);
	return info;
}

/* What make_info allocated (the names are strdup'ed; addresses point to
 * static storage). */
static void free_info(struct fi_info *info)
{
	if (info->domain_attr)
		free(info->domain_attr->name);
	if (info->fabric_attr) {
		free(info->fabric_attr->name);
		free(info->fabric_attr->prov_name);
	}
	free(info->tx_attr);
	free(info->rx_attr);
	free(info->ep_attr);
	free(info->domain_attr);
	free(info->fabric_attr);
	free(info);
}

int main(void)
{
	char name[64], small[128];
	unsigned i;
	int k;

	for (k = 0; k < 6; k++) {
		struct fi_info *info = make_info(k);
		snprintf(name, sizeof name, "info %d", k); show(name, info, FI_TYPE_INFO);
		if (info->tx_attr) {
			snprintf(name, sizeof name, "tx %d", k); show(name, info->tx_attr, FI_TYPE_TX_ATTR);
			snprintf(name, sizeof name, "rx %d", k); show(name, info->rx_attr, FI_TYPE_RX_ATTR);
			snprintf(name, sizeof name, "ep %d", k); show(name, info->ep_attr, FI_TYPE_EP_ATTR);
			snprintf(name, sizeof name, "domain %d", k); show(name, info->domain_attr, FI_TYPE_DOMAIN_ATTR);
			snprintf(name, sizeof name, "fabric %d", k); show(name, info->fabric_attr, FI_TYPE_FABRIC_ATTR);
		}
		/* bounded copies, cut at various lengths */
		for (i = 1; i < sizeof small; i += 13) {
			char *r = fi_tostr_r(small, i, info, FI_TYPE_INFO);
			printf("== tostr_r info %d len %u\n%s\n", k, i, r == small ? small : "<bad>");
		}
		free_info(info);
	}
	for (i = 0; i < sizeof flag_sets / sizeof flag_sets[0]; i++) {
		static const enum fi_type ft[] = { FI_TYPE_CAPS, FI_TYPE_OP_FLAGS, FI_TYPE_MODE,
			FI_TYPE_MSG_ORDER, FI_TYPE_CQ_EVENT_FLAGS };
		unsigned j;
		for (j = 0; j < 5; j++) {
			snprintf(name, sizeof name, "flags %u type %d", i, ft[j]);
			show(name, &flag_sets[i], ft[j]);
		}
		snprintf(name, sizeof name, "mr_mode %u", i);
		SHOW(name, (int)(flag_sets[i] & 0x7fffffff) & ~(1 << 12), FI_TYPE_MR_MODE);
	}
	for (k = -2; k < 40; k++) {
		static const enum fi_type et[] = { FI_TYPE_EP_TYPE, FI_TYPE_ADDR_FORMAT,
			FI_TYPE_THREADING, FI_TYPE_PROGRESS, FI_TYPE_PROTOCOL, FI_TYPE_AV_TYPE,
			FI_TYPE_ATOMIC_TYPE, FI_TYPE_ATOMIC_OP, FI_TYPE_EQ_EVENT, FI_TYPE_OP_TYPE,
			FI_TYPE_COLLECTIVE_OP, FI_TYPE_HMEM_IFACE, FI_TYPE_CQ_FORMAT,
			FI_TYPE_LOG_LEVEL, FI_TYPE_LOG_SUBSYS };
		unsigned j;
		for (j = 0; j < sizeof et / sizeof et[0]; j++) {
			snprintf(name, sizeof name, "enum %d type %d", k, et[j]);
			show(name, &k, et[j]);
		}
	}
	SHOW("addr_format prov", 0x80000011u, FI_TYPE_ADDR_FORMAT);
	SHOW("protocol prov", 0x80000001u, FI_TYPE_PROTOCOL);
	SHOW("unknown type", 1, (enum fi_type)1000);
	show("version", &k, FI_TYPE_VERSION);
	{
		/* addresses differ from run to run: print whether the text is
		 * the label and the pointer, as "%p" writes it */
		struct fid f = { 0 };
		char want[64], *got = fi_tostr(&f, FI_TYPE_FID);
		snprintf(want, sizeof want, "fid: %p\n", (void *)&f);
		printf("== fid\n%s\n", got && !strcmp(got, want) ? "label and pointer" : got);
	}
	printf("== tostr null\n%s\n", fi_tostr(NULL, FI_TYPE_CAPS) ? "<set>" : "<NULL>");
	printf("== tostr_r null\n%s %s\n", fi_tostr_r(small, 0, &k, FI_TYPE_CAPS) ? "<set>" : "<NULL>",
	       fi_tostr_r(NULL, 10, &k, FI_TYPE_CAPS) ? "<set>" : "<NULL>");
	for (k = -300; k <= 300; k++) {
		const char *m = fi_strerror(k);
		printf("== strerror %d\n%s\n", k, m ? m : "<NULL>");
	}
	printf("== strerror min\n%s\n", fi_strerror(-2147483647 - 1));
	return 0;
}
