/* The small macros every file of the engine uses. */
#ifndef SK_MACROS_H
#define SK_MACROS_H


#define SK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SK_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SK_MAX(a, b) ((a) > (b) ? (a) : (b))
#define SK_UNUSED(x) ((void)(x))

#endif
