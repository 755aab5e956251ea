/* Bad input to every exported function and to the ops tables of the objects
 * the core hands out: each call must return its documented error code
 * (never crash). Built against our headers with -Wall -Wextra -Werror and run
 * under ASan/UBSan by tests/c/bad_input.sh. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

static int passed, failed;
#define CHECK(cond, what) do { if (cond) { passed++; } else { failed++; \
	printf("FAIL %s (line %d)\n", what, __LINE__); } } while (0)
#define RC(call, want) do { int rc_ = (call); CHECK(rc_ == (want), #call); \
	if (rc_ != (want)) printf("     got %d want %d\n", rc_, (want)); } while (0)

int main(void)
{
	struct fi_info *info = NULL, *hints;
	struct fid_fabric *fabric = NULL;
	struct fid *fid = NULL;
	char big[8192], buf[64];
	uint64_t u = FI_MSG;

	setvbuf(stdout, NULL, _IONBF, 0);

	/* fi_getinfo */
	RC(fi_getinfo(FI_VERSION(2, 8), NULL, NULL, 0, NULL, NULL), -FI_EINVAL);
	RC(fi_getinfo(FI_VERSION(3, 0), NULL, NULL, 0, NULL, &info), -FI_ENOSYS);
	CHECK(info == NULL, "info NULL after failure");
	RC(fi_getinfo(FI_VERSION(2, 99), NULL, NULL, 0, NULL, &info), -FI_ENOSYS);
	RC(fi_getinfo(FI_VERSION(0, 9), NULL, NULL, 0, NULL, &info), -FI_ENOSYS);
	RC(fi_getinfo(FI_VERSION(2, 8), NULL, NULL, 1ULL << 3, NULL, &info), -FI_EBADFLAGS);
	memset(big, 'a', sizeof(big)); big[sizeof(big) - 1] = '\0';
	RC(fi_getinfo(FI_VERSION(2, 8), big, NULL, 0, NULL, &info), -FI_EINVAL);
	hints = fi_allocinfo();
	CHECK(hints != NULL, "fi_allocinfo");
	hints->src_addr = malloc(16); hints->src_addrlen = 16; memset(hints->src_addr, 0, 16);
	hints->addr_format = FI_FORMAT_UNSPEC;
	RC(fi_getinfo(FI_VERSION(2, 8), NULL, NULL, 0, hints, &info), -FI_EINVAL);
	free(hints->src_addr); hints->src_addr = NULL; hints->src_addrlen = 0;
	hints->caps = FI_REMOTE_COMM; hints->fabric_attr->prov_name = strdup("shm");
	RC(fi_getinfo(FI_VERSION(2, 8), NULL, NULL, 0, hints, &info), -FI_ENODATA);
	hints->caps = 0;
	hints->fabric_attr->prov_name[0] = '\0';
	RC(fi_getinfo(FI_VERSION(2, 8), NULL, NULL, 0, hints, &info), -FI_ENODATA);
	free(hints->fabric_attr->prov_name); hints->fabric_attr->prov_name = strdup("no-such-provider");
	RC(fi_getinfo(FI_VERSION(2, 8), NULL, NULL, 0, hints, &info), -FI_ENODATA);
	free(hints->fabric_attr->prov_name); hints->fabric_attr->prov_name = strdup("shm");
	hints->ep_attr->type = FI_EP_RDM; hints->caps = FI_MSG | FI_TAGGED;
	RC(fi_getinfo(FI_VERSION(2, 8), NULL, NULL, 0, hints, &info), 0);
	CHECK(info && info->fabric_attr && !strcmp(info->fabric_attr->prov_name, "shm"), "shm info");
	fi_freeinfo(info); info = NULL;
	RC(fi_getinfo(FI_VERSION(2, 8), NULL, NULL, FI_PROV_ATTR_ONLY, NULL, &info), 0);
	fi_freeinfo(info); info = NULL;
	/* Old API versions are accepted. */
	RC(fi_getinfo(FI_VERSION(1, 0), NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(info); info = NULL;
	fi_freeinfo(NULL);
	{
		struct fi_info *e = fi_dupinfo(NULL);
		CHECK(e && e->tx_attr && e->domain_attr && e->fabric_attr && !e->fabric_attr->prov_name,
		      "fi_dupinfo(NULL) is an empty info");
		fi_freeinfo(e);
	}

	/* fi_fabric / fi_fabric2 */
	RC(fi_fabric(NULL, &fabric, NULL), -FI_EINVAL);
	RC(fi_fabric(hints->fabric_attr, NULL, NULL), -FI_EINVAL);
	free(hints->fabric_attr->prov_name); hints->fabric_attr->prov_name = strdup("no-such-provider");
	RC(fi_fabric(hints->fabric_attr, &fabric, NULL), -FI_ENODATA);
	free(hints->fabric_attr->prov_name); hints->fabric_attr->prov_name = NULL;
	RC(fi_fabric(hints->fabric_attr, &fabric, NULL), -FI_EINVAL);
	RC(fi_fabric2(NULL, &fabric, 0, NULL), -FI_EINVAL);
	hints->fabric_attr->prov_name = strdup("shm");
	{
		/* An unterminated name is refused (and logged), not read as NULL. */
		char *unterminated = malloc(4096);
		int rc_fab;
		memset(unterminated, 'a', 4096);
		hints->fabric_attr->name = unterminated;
		RC(rc_fab = fi_fabric(hints->fabric_attr, &fabric, NULL), -FI_EINVAL);
		if (rc_fab == 0)
			fi_close(&fabric->fid);
		hints->fabric_attr->name = NULL;
		RC(fi_open(FI_VERSION(2, 8), unterminated, NULL, 0, 0, &fid, NULL), -FI_EINVAL);
		free(unterminated);
		fabric = NULL;
	}
	RC(fi_fabric2(hints, &fabric, 1, NULL), -FI_EINVAL);
	RC(fi_fabric2(hints, &fabric, 0, NULL), 0);
	if (fabric) {
		/* Every slot of the fabric's tables is filled. */
		CHECK(fabric->fid.ops && fabric->fid.ops->close && fabric->fid.ops->bind &&
		      fabric->fid.ops->control && fabric->fid.ops->ops_open, "fabric fi_ops filled");
		CHECK(fabric->ops && fabric->ops->domain && fabric->ops->passive_ep &&
		      fabric->ops->eq_open && fabric->ops->wait_open && fabric->ops->trywait, "fabric ops filled");
		RC(fi_domain(fabric, NULL, NULL, NULL), -FI_EINVAL);
		RC(fi_control(&fabric->fid, 12345, NULL), -FI_ENOSYS);
		RC(fi_close(&fabric->fid), 0);
	}

	/* fi_open */
	RC(fi_open(FI_VERSION(2, 8), NULL, NULL, 0, 0, &fid, NULL), -FI_EINVAL);
	RC(fi_open(FI_VERSION(2, 8), "no-such-object", NULL, 0, 0, &fid, NULL), -FI_ENOSYS);
	RC(fi_open(FI_VERSION(3, 0), "mr_cache", NULL, 0, 0, &fid, NULL), -FI_ENOSYS);

	/* strings */
	CHECK(fi_strerror(INT_MIN) != NULL, "fi_strerror(INT_MIN)");
	CHECK(!strcmp(fi_strerror(FI_EINVAL), fi_strerror(-FI_EINVAL)), "fi_strerror sign");
	CHECK(fi_tostr(NULL, FI_TYPE_CAPS) == NULL || fi_tostr(NULL, FI_TYPE_CAPS)[0] == '\0', "fi_tostr(NULL)");
	CHECK(fi_tostr(&u, (enum fi_type) 9999) != NULL, "fi_tostr unknown type");
	CHECK(fi_tostr_r(buf, 0, &u, FI_TYPE_CAPS) == NULL, "fi_tostr_r len 0");
	CHECK(fi_tostr_r(NULL, 10, &u, FI_TYPE_CAPS) == NULL, "fi_tostr_r NULL buf");
	CHECK(fi_tostr_r(buf, 4, &u, FI_TYPE_CAPS) == buf && strlen(buf) < 4, "fi_tostr_r truncates (as upstream: to 2 chars here)");

	/* params */
	RC(fi_param_get(NULL, NULL, buf), -FI_EINVAL);
	RC(fi_param_get(NULL, "no_such_param", buf), -FI_ENOENT);
	RC(fi_getparams(NULL, NULL), -FI_EINVAL);
	fi_freeparams(NULL);
	CHECK(fi_version() == FI_VERSION(2, 8), "fi_version");

	fi_freeinfo(hints);
	printf("bad_input: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
