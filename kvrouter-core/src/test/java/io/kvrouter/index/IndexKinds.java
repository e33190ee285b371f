package io.kvrouter.index;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/** Every index kind, for tests that must hold for all of them. */
final class IndexKinds {
  private IndexKinds() {}

  static List<Supplier<KvIndex>> suppliers() {
    List<Supplier<KvIndex>> out = new ArrayList<>();
    out.add(KvIndexes::radixTree);
    out.add(KvIndexes::concurrentRadixTree);
    out.add(() -> KvIndexes.positional(32));
    out.add(() -> KvIndexes.positional(1));
    out.add(() -> KvIndexes.threadPool(KvIndexes.concurrentRadixTree(), 2));
    out.add(() -> KvIndexes.threadPool(KvIndexes.positional(32), 2));
    return out;
  }

  static List<KvIndex> all() {
    List<KvIndex> out = new ArrayList<>();
    for (Supplier<KvIndex> s : suppliers()) out.add(s.get());
    return out;
  }
}
