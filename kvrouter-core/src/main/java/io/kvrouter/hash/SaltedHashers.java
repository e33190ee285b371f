package io.kvrouter.hash;

import java.util.Objects;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.jspecify.annotations.Nullable;

/**
 * Salted variants of the unsalted {@link BlockHasher} of one block size, for salts that arrive with
 * each request (a LoRA adapter name, a cache namespace or cache salt), behind a cache of bounded
 * size: whatever strings clients send, it holds at most {@link #CAPACITY} hashers, each for at most
 * {@link #MAX_CACHED_CHARS} characters of salt. Thread-safe.
 *
 * <pre>
 * Implementation notes
 *
 * Why a cache: building a salted hasher hashes both salts and derives an XXH3 seed schedule
 * (a few tenths of a µs, docs/routing.md), and requests usually repeat a handful of adapters and
 * namespaces. Why bounded: the salts are client-controlled strings (an HTTP body may carry
 * megabytes of them), so a map keyed by them would keep every distinct salt for good.
 *
 * Layout: a direct-mapped table of CAPACITY slots, an AtomicReferenceArray of immutable Entries
 * (lora, namespace, hasher); a salt pair hashes to one slot. get() reads its slot (acquire): on a
 * hit (both strings equal) it returns the entry's hasher and allocates nothing; on a miss it
 * builds the hasher with BlockHasher.withSalt and stores a new Entry in the slot (release),
 * replacing whatever was there. Salts longer than MAX_CACHED_CHARS together skip the table: they
 * are hashed on every call and never kept. Writers racing on one slot each store a correct
 * entry and the last one stays, so readers see either the old entry or a new one, never a torn
 * one.
 * </pre>
 */
public final class SaltedHashers {
  /** Hashers held at most. */
  public static final int CAPACITY = 64;

  /** The longest salt pair (LoRA name plus namespace, in chars) that is cached. */
  public static final int MAX_CACHED_CHARS = 256;

  private record Entry(@Nullable String lora, @Nullable String namespace, BlockHasher hasher) {}

  private final BlockHasher base;
  private final AtomicReferenceArray<Entry> table = new AtomicReferenceArray<>(CAPACITY);

  /** Salted variants of {@code BlockHasher.of(blockSize)}. */
  public SaltedHashers(int blockSize) {
    this.base = BlockHasher.of(blockSize);
  }

  /** The unsalted hasher, {@code BlockHasher.of(blockSize)}. */
  public BlockHasher base() {
    return base;
  }

  /**
   * {@code base().withSalt(loraName, namespace)}, from the cache when the pair was seen lately;
   * {@code null} or empty means none, and with neither salt it is {@link #base()} itself.
   */
  public BlockHasher get(@Nullable String loraName, @Nullable String namespace) {
    final String lora = loraName == null || loraName.isEmpty() ? null : loraName;
    final String ns = namespace == null || namespace.isEmpty() ? null : namespace;
    if (lora == null && ns == null) return base;
    final int chars = (lora == null ? 0 : lora.length()) + (ns == null ? 0 : ns.length());
    if (chars > MAX_CACHED_CHARS) return base.withSalt(lora, ns);
    int h = 31 * Objects.hashCode(lora) + Objects.hashCode(ns);
    final int slot = (h ^ (h >>> 16)) & (CAPACITY - 1);
    Entry e = table.getAcquire(slot);
    if (e != null && Objects.equals(e.lora, lora) && Objects.equals(e.namespace, ns)) {
      return e.hasher;
    }
    BlockHasher salted = base.withSalt(lora, ns);
    table.setRelease(slot, new Entry(lora, ns, salted));
    return salted;
  }

  /** Hashers held now (at most {@link #CAPACITY}). */
  public int size() {
    int n = 0;
    for (int i = 0; i < CAPACITY; i++) {
      if (table.getAcquire(i) != null) n++;
    }
    return n;
  }

  @Override
  public String toString() {
    return "SaltedHashers[" + base + ", " + size() + " cached]";
  }
}
