/**
 * The engine-side prefix cache (DESIGN.md §5, pinned): {@link io.kvrouter.prefixcache.RadixTree}, a
 * radix tree of token blocks with locks and LRU eviction, and {@link
 * io.kvrouter.prefixcache.PrefixCache}, one engine's block pool over it, which publishes the KV
 * events a real engine publishes (the mock engine and the simulator use it).
 */
@NullMarked
package io.kvrouter.prefixcache;

import org.jspecify.annotations.NullMarked;
