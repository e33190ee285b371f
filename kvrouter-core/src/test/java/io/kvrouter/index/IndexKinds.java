package io.kvrouter.index;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/** Every index kind, for tests that must hold for all of them. */
final class IndexKinds {
  /** A bound above any test's (worker, block) pairs: bounded kinds never evict under it. */
  static final long NEVER_REACHED = 1L << 22;

  private IndexKinds() {}

  static List<Supplier<KvIndex>> suppliers() {
    List<Supplier<KvIndex>> out = new ArrayList<>();
    out.add(KvIndexes::radixTree);
    out.add(KvIndexes::concurrentRadixTree);
    out.add(() -> KvIndexes.positional(32));
    out.add(() -> KvIndexes.positional(1));
    out.add(() -> KvIndexes.threadPool(KvIndexes.concurrentRadixTree(), 2));
    out.add(KvIndexes::compressedTree);
    out.add(KvIndexes::concurrentCompressedTree);
    out.add(() -> KvIndexes.threadPool(KvIndexes.concurrentCompressedTree(), 2));
    out.add(() -> KvIndexes.threadPool(KvIndexes.positional(32), 2));
    // bounded kinds with a bound no test reaches: they must answer exactly like the others
    out.add(() -> KvIndexes.radixTree(NEVER_REACHED));
    out.add(() -> KvIndexes.concurrentRadixTree(NEVER_REACHED));
    out.add(() -> KvIndexes.positional(32, NEVER_REACHED));
    out.add(() -> KvIndexes.threadPool(KvIndexes.concurrentRadixTree(NEVER_REACHED), 2));
    out.add(() -> KvIndexes.compressedTree(NEVER_REACHED));
    out.add(() -> KvIndexes.concurrentCompressedTree(NEVER_REACHED));
    out.add(() -> KvIndexes.threadPool(KvIndexes.concurrentCompressedTree(NEVER_REACHED), 2));
    return out;
  }

  static List<KvIndex> all() {
    List<KvIndex> out = new ArrayList<>();
    for (Supplier<KvIndex> s : suppliers()) out.add(s.get());
    return out;
  }
}
