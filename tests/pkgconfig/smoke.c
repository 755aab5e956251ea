/* Built with only `pkg-config --cflags --libs libfabric`: links against the
 * installed library and calls into it. Declarations are local so the test
 * does not depend on which headers are installed. */
#include <stdint.h>
#include <stdio.h>

uint32_t fi_version(void);
struct fi_info;
struct fi_info *fi_dupinfo(const struct fi_info *info);
void fi_freeinfo(struct fi_info *info);

int main(void)
{
	uint32_t v = fi_version();
	struct fi_info *info = fi_dupinfo(NULL);

	printf("fi_version %u.%u\n", v >> 16, v & 0xffff);
	if (v >> 16 < 1 || !info) {
		fprintf(stderr, "smoke: bad version or no fi_info\n");
		return 1;
	}
	fi_freeinfo(info);
	return 0;
}
