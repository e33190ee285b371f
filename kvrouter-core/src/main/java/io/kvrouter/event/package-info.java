/**
 * The KV cache events engines emit and the index applies (DESIGN.md §3, pinned): {@link
 * io.kvrouter.event.CacheEvent} (a chain of blocks stored, blocks removed, a worker's cache
 * cleared), the {@link io.kvrouter.event.RouterEvent} envelope with its worker and event id, and
 * {@link io.kvrouter.event.Worker}, an engine's (worker id, data-parallel rank).
 */
@NullMarked
package io.kvrouter.event;

import org.jspecify.annotations.NullMarked;
