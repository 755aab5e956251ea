/* A program "linked long ago": binds fi_dupinfo/fi_freeinfo/fi_getinfo of
 * ABI 1.0 and 1.3 explicitly and hands them structs of exactly the old
 * sizes (112-byte fi_info, 120-byte domain attr, ...). Run it under
 * valgrind: any access past an old size is reported. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__asm__(".symver dupinfo_1_0, fi_dupinfo@FABRIC_1.0");
__asm__(".symver freeinfo_1_0, fi_freeinfo@FABRIC_1.0");
__asm__(".symver getinfo_1_0, fi_getinfo@FABRIC_1.0");
__asm__(".symver dupinfo_1_3, fi_dupinfo@FABRIC_1.3");
__asm__(".symver freeinfo_1_3, fi_freeinfo@FABRIC_1.3");

void *dupinfo_1_0(const void *info);
void freeinfo_1_0(void *info);
int getinfo_1_0(uint32_t version, const char *node, const char *service,
		uint64_t flags, const void *hints, void **info);
void *dupinfo_1_3(const void *info);
void freeinfo_1_3(void *info);

/* Offsets from tests/abi/layout-compat.tsv. */
enum { INFO_1_0 = 112, INFO_1_3 = 120, DOM_1_0 = 120, DOM_1_3 = 192,
       FAB_1_0 = 32, TX_1_0 = 72, EP_1_0 = 80 };

static int failures;
#define CHECK(c) do { if (!(c)) { printf("FAIL: %s (line %d)\n", #c, __LINE__); failures++; } } while (0)

static void *field(void *p, size_t off) { return *(void **)((char *)p + off); }
static uint64_t u64(void *p, size_t off) { return *(uint64_t *)((char *)p + off); }

int main(void)
{
	/* 1.0 hints of exact old sizes. */
	char *info = calloc(1, INFO_1_0), *dom = calloc(1, DOM_1_0), *fab = calloc(1, FAB_1_0);
	char *tx = calloc(1, TX_1_0), *ep = calloc(1, EP_1_0);
	*(uint64_t *)(info + 8) = 0x18;             /* caps */
	*(void **)(info + 72) = tx;
	*(void **)(info + 88) = ep;
	*(void **)(info + 96) = dom;
	*(void **)(info + 104) = fab;
	*(uint64_t *)(tx + 64) = 7;                 /* rma_iov_limit, last tx_attr_1_0 member */
	*(uint64_t *)(dom + 112) = 5;               /* max_ep_srx_ctx, last domain_attr_1_0 member */
	*(char **)(dom + 8) = strdup("dom");
	*(char **)(fab + 16) = strdup("shm");        /* prov_name */

	void *d = dupinfo_1_0(info);
	CHECK(d != NULL);
	if (d) {
		CHECK(u64(d, 8) == 0x18);
		CHECK(field(d, 96) != dom && field(d, 96) != NULL);
		CHECK(u64(field(d, 96), 112) == 5);
		CHECK(u64(field(d, 72), 64) == 7);
		CHECK(strcmp((char *)field(field(d, 104), 16), "shm") == 0);
		CHECK(strcmp((char *)field(field(d, 96), 8), "dom") == 0);
		freeinfo_1_0(d);
	}

	void *out = (void *)1;
	int rc = getinfo_1_0(0x10000, NULL, NULL, 0, info, &out);
	printf("fi_getinfo@FABRIC_1.0 with 1.0 hints: %d\n", rc);
	if (rc == 0)
		freeinfo_1_0(out);
	else
		CHECK(out == NULL);

	free(*(char **)(dom + 8));
	free(*(char **)(fab + 16));
	free(info); free(dom); free(fab); free(tx); free(ep);

	/* An empty 1.3 entry: attrs present, nic member at 112 is NULL. */
	void *e = dupinfo_1_3(NULL);
	CHECK(e != NULL);
	if (e) {
		CHECK(field(e, 96) != NULL && field(e, 104) != NULL);
		CHECK(field(e, 112) == NULL);
		void *e2 = dupinfo_1_3(e);
		CHECK(e2 != NULL);
		freeinfo_1_3(e2);
		freeinfo_1_3(e);
	}
	(void)INFO_1_3; (void)DOM_1_3;
	printf("compat_abi: %s\n", failures ? "FAILED" : "passed");
	return failures != 0;
}
