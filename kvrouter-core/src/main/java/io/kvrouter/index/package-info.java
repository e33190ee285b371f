/**
 * The KV index (DESIGN.md §4, pinned): which worker caches which block. {@link
 * io.kvrouter.index.KvIndex} and its factory {@link io.kvrouter.index.KvIndexes} (the radix tree,
 * the compressed tree, the positional index, their concurrent variants and the thread-pool
 * indexer), the {@link io.kvrouter.index.OverlapScores} of a lookup, and {@link
 * io.kvrouter.index.TieredIndex} for blocks beyond the GPU. The implementations are
 * package-private; docs/concurrency.md describes their writers and readers.
 */
@NullMarked
package io.kvrouter.index;

import org.jspecify.annotations.NullMarked;
