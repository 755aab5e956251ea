/* A small DL provider used to test how the core loads lib*-fi.so files.
 * Built several times with different FAKE_* macros (see run.sh); each build
 * exercises one way a provider library can be good or broken. */
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

#ifndef FAKE_NAME
#define FAKE_NAME "fake"
#endif
#ifndef FAKE_API
#define FAKE_API FI_VERSION(1, 17)
#endif

static int fake_getinfo(uint32_t version, const char *node, const char *service,
			uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	struct fi_info *fi;
	(void) version; (void) node; (void) service; (void) flags;
	if (hints && hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC &&
	    hints->ep_attr->type != FI_EP_DGRAM)
		return -FI_ENODATA;
	fi = fi_allocinfo();
	if (!fi)
		return -FI_ENOMEM;
	fi->caps = FI_MSG | FI_SEND | FI_RECV;
	fi->addr_format = FI_SOCKADDR_IN;
	fi->ep_attr->type = FI_EP_DGRAM;
	fi->ep_attr->max_msg_size = 1234;
	fi->tx_attr->inject_size = 56;
	fi->domain_attr->name = strdup(FAKE_NAME "_domain");
	fi->domain_attr->mr_key_size = 7;
	fi->fabric_attr->name = strdup(FAKE_NAME "_fabric");
	/* prov_name left NULL: the core names the provider, as upstream's does. */
	*info = fi;
	return 0;
}

static int fake_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	(void) attr; (void) fabric; (void) context;
	return -FI_ENOSYS;
}

static void fake_cleanup(void) {}

static struct fi_provider fake_prov __attribute__((used)) = {
	.version = FI_VERSION(9, 1),
	.fi_version = FAKE_API,
	.name = FAKE_NAME,
	.getinfo = fake_getinfo,
	.fabric = fake_fabric,
	.cleanup = fake_cleanup,
};

#if defined(FAKE_NO_INI)
int fi_prov_ini_misspelled(void);
int fi_prov_ini_misspelled(void) { return 0; }
#elif defined(FAKE_NULL)
struct fi_provider *fi_prov_ini(void);
struct fi_provider *fi_prov_ini(void) { return NULL; }
#elif defined(FAKE_NO_NAME)
struct fi_provider *fi_prov_ini(void);
struct fi_provider *fi_prov_ini(void) { fake_prov.name = NULL; return &fake_prov; }
#else
struct fi_provider *fi_prov_ini(void);
struct fi_provider *fi_prov_ini(void) { return &fake_prov; }
#endif
