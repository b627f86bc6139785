/*
 * hash.h — a fast, non-cryptographic string hash for in-process tables
 * (bucket and slot choice). Never for anything an attacker must not steer to
 * collide at will where that would cost more than a longer chain.
 */
#ifndef TK_HASH_H
#define TK_HASH_H

#include <stdint.h>

/* 32-bit FNV-1a of the NUL-terminated s (offset basis 2166136261, prime
 * 16777619): tk_hash_fnv1a("") == 2166136261, tk_hash_fnv1a("a") == 0xe40c292c. */
uint32_t tk_hash_fnv1a(const char *s);

#endif
