/* Work-stealing thread pool.
 *
 * Each worker owns a fixed-capacity Chase-Lev deque (Le, Pop, Cohen and
 * Zappa Nardelli, "Correct and Efficient Work-Stealing for Weak Memory
 * Models", PPoPP 2013): the owner pushes and takes at the bottom, thieves
 * steal from the top. Tasks submitted from outside the pool, or pushed onto
 * a full deque, go to one mutex-protected overflow queue. Idle workers steal
 * from random victims, then check the overflow queue, then park on a
 * condition variable: no busy spinning.
 *
 * Tasks are intrusive and owned by the submitter: the sk_task must stay
 * valid until its function has returned. The pool never allocates per task.
 */
#ifndef SK_POOL_H
#define SK_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sk_pool sk_pool;
typedef struct sk_group sk_group;

typedef struct sk_task {
    void (*fn)(struct sk_task *self);
    sk_group *group;      /* may be NULL */
    struct sk_task *next; /* overflow queue link, pool-private */
} sk_task;

/* Counts unfinished tasks so a submitter can wait for a batch. */
struct sk_group {
    atomic_long pending;
};

static inline void sk_group_init(sk_group *g) { atomic_init(&g->pending, 0); }

/* Start nthreads workers, each with a deque of deque_cap tasks (rounded up
 * to a power of two). Returns NULL on failure. Caller owns the pool:
 * sk_pool_free() joins the workers after they drain every queued task. */
sk_pool *sk_pool_new(int nthreads, size_t deque_cap);
void sk_pool_free(sk_pool *p);
int sk_pool_threads(const sk_pool *p);

/* Queue t (with t->fn set). From a worker of this pool it goes to the
 * worker's own deque; otherwise to the overflow queue. Any thread. */
void sk_pool_submit(sk_pool *p, sk_task *t, sk_group *g);

/* Wait until every task of g has finished. Workers calling this help by
 * running other tasks; other threads sleep. */
void sk_pool_wait(sk_pool *p, sk_group *g);

/* From outside the pool: wait until one of the n groups has finished and
 * return its index (the lowest, if several have). n > 0. */
size_t sk_pool_wait_any(sk_pool *p, sk_group *const *gs, size_t n);
/* Non-blocking: 1 and *which set if one of the groups has finished. */
int sk_pool_done_any(sk_group *const *gs, size_t n, size_t *which);

/* From outside the pool: run one task submitted from outside, if any is
 * queued, on the calling thread. Returns 1 if it ran one. A submitter with
 * nothing else to do helps instead of sleeping. */
int sk_pool_help(sk_pool *p);

/* ---- the deque, exposed for its unit tests ---------------------------- */

typedef struct sk_deque {
    _Alignas(64) _Atomic int64_t top;
    _Alignas(64) _Atomic int64_t bottom;
    _Alignas(64) _Atomic(sk_task *) *slots;
    int64_t mask;
} sk_deque;

#define SK_DEQUE_EMPTY ((sk_task *)0)
#define SK_DEQUE_ABORT ((sk_task *)1) /* lost a race; try again */

int sk_deque_init(sk_deque *d, size_t cap); /* cap: power of two */
void sk_deque_destroy(sk_deque *d);
/* Owner only. Returns 0, or -1 when full. */
int sk_deque_push(sk_deque *d, sk_task *t);
/* Owner only. Returns a task or SK_DEQUE_EMPTY. */
sk_task *sk_deque_take(sk_deque *d);
/* Any thread. Returns a task, SK_DEQUE_EMPTY or SK_DEQUE_ABORT. */
sk_task *sk_deque_steal(sk_deque *d);

#endif
