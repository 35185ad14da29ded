#include "_MemoryStoreShims.h"

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

// The commands of <linux/membarrier.h>, spelt out: that header is not on every system that
// builds this file.
enum {
  MEMORYSTORE_MEMBARRIER_CMD_QUERY = 0,
  MEMORYSTORE_MEMBARRIER_CMD_PRIVATE_EXPEDITED = 1 << 3,
  MEMORYSTORE_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED = 1 << 4,
};

int _memorystore_membarrier_register(void) {
#if defined(SYS_membarrier)
  long commands = syscall(SYS_membarrier, MEMORYSTORE_MEMBARRIER_CMD_QUERY, 0, 0);
  if (commands < 0 || !(commands & MEMORYSTORE_MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return -1;
  return syscall(SYS_membarrier, MEMORYSTORE_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0
    ? 0 : -1;
#else
  return -1;
#endif
}

int _memorystore_membarrier(void) {
#if defined(SYS_membarrier)
  return syscall(SYS_membarrier, MEMORYSTORE_MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 ? 0 : -1;
#else
  return -1;
#endif
}

#else

int _memorystore_membarrier_register(void) { return -1; }
int _memorystore_membarrier(void) { return -1; }

#endif
