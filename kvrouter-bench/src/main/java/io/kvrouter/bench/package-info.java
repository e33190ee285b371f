/**
 * JMH benchmarks of the hot paths (block hashing, findMatches, event apply, route, the prefix
 * cache, tokenization) and tools that measure an index's footprint, layout and write CPU; packaged
 * as {@code benchmarks.jar} (docs/BENCHMARKS.md).
 */
package io.kvrouter.bench;
