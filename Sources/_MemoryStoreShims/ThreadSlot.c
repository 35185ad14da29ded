#include "_MemoryStoreShims.h"

_Thread_local long _memorystore_thread_slot = 0;
