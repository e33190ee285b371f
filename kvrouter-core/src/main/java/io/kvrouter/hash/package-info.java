/**
 * Block hashing (DESIGN.md §2, pinned): {@link io.kvrouter.hash.BlockHasher} turns a prompt's token
 * ids into one local hash per full block, {@link io.kvrouter.hash.SequenceHasher} chains them into
 * the sequence hashes engines name blocks by, and {@link io.kvrouter.hash.SaltedHashers} keeps the
 * salted hashers (LoRA adapter, cache namespace) in a bounded cache.
 */
@NullMarked
package io.kvrouter.hash;

import org.jspecify.annotations.NullMarked;
