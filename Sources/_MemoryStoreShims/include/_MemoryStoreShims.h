#ifndef MEMORYSTORE_SHIMS_H
#define MEMORYSTORE_SHIMS_H

/// Registers the process for `_memorystore_membarrier()`: returns 0 on success, -1 where the
/// system has no expedited private `membarrier` (not Linux, a kernel older than 4.14, or a
/// sandbox that refuses the call).
int _memorystore_membarrier_register(void);

/// Makes every thread of the process that is running execute a full memory barrier, and
/// returns once they have (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`): stores that another
/// thread made before its barrier are then visible here, and this thread's earlier stores
/// there. Returns 0 on success, -1 otherwise. Only after a successful
/// `_memorystore_membarrier_register()`.
int _memorystore_membarrier(void);

/// The calling thread's slot number for `_ThreadSlot`: 0 until it is given one. A thread-local
/// variable, read inline (a load relative to the thread pointer), where `pthread_getspecific`
/// is a call into the C library.
extern _Thread_local long _memorystore_thread_slot;

/// The calling thread's slot number, 0 if it has none yet.
static inline long _memorystore_get_thread_slot(void) { return _memorystore_thread_slot; }

/// Gives the calling thread its slot number.
static inline void _memorystore_set_thread_slot(long slot) { _memorystore_thread_slot = slot; }

#endif
