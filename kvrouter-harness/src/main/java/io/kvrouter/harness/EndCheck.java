package io.kvrouter.harness;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;

/**
 * {@code bench fleet}'s end check: after the last answer, the router's index of every engine must
 * equal that engine's cache, hash for hash.
 *
 * <pre>
 * Implementation notes
 *
 * For each engine (instance id = its index + 1, one rank): its /mock/cache gives the block hashes
 * it holds (engine_block_hashes) and the sequence of the last KV event batch it published
 * (last_event_seq). The check waits (polling /workers every 20 ms, 30 s for all engines together)
 * until the router's ZMQ listener of that rank reports that sequence as its last_sequence, so the
 * router dealt with every batch; then the stored blocks of the router's /dump, per worker, must
 * be the engine's set. Hashes are compared as the decimal strings the JSON carries, in TreeSets.
 * Problems (a sequence never reached, a set that differs, with its missing and extra counts) are
 * appended to run.indexProblems, and every engine's block count to run.blocksCompared; a
 * gateway's HTTP failure is an exception. Stateless apart from its FleetReads.
 * </pre>
 */
final class EndCheck {
  private final FleetReads reads;

  EndCheck(FleetReads reads) {
    this.reads = reads;
  }

  /** Checks the router of {@code gateway} against every engine of {@code fleet}, into run. */
  void check(String gateway, List<? extends FleetEngine> fleet, PolicyRun run) throws Exception {
    List<TreeSet<String>> expected = new ArrayList<>();
    List<Long> seqs = new ArrayList<>();
    for (FleetEngine e : fleet) {
      JsonNode d = reads.json(e.url() + "/mock/cache");
      TreeSet<String> s = new TreeSet<>();
      d.path("engine_block_hashes").forEach(h -> s.add(h.asText()));
      expected.add(s);
      seqs.add(d.path("last_event_seq").asLong());
    }
    long deadline = System.nanoTime() + 30_000_000_000L;
    for (int i = 0; i < fleet.size(); i++) {
      long id = i + 1L;
      long want = seqs.get(i);
      while (lastSequence(gateway, id) != want) {
        if (System.nanoTime() > deadline) {
          run.indexProblems.add(
              "engine " + id + ": the router never reached the engine's last batch " + want);
          break;
        }
        Thread.sleep(20);
      }
    }
    Map<Long, TreeSet<String>> indexed = storedBlocks(reads.json(gateway + "/dump"));
    for (int i = 0; i < fleet.size(); i++) {
      TreeSet<String> got = indexed.getOrDefault((long) i + 1, new TreeSet<>());
      TreeSet<String> want = expected.get(i);
      run.blocksCompared += want.size();
      String problem = difference(i + 1, got, want);
      if (problem != null) run.indexProblems.add(problem);
    }
  }

  /** The block hashes of every stored event of a router's /dump, by worker id. */
  static Map<Long, TreeSet<String>> storedBlocks(JsonNode dump) {
    Map<Long, TreeSet<String>> indexed = new LinkedHashMap<>();
    for (JsonNode index : dump.path("indexes")) {
      for (JsonNode e : index.path("events")) {
        JsonNode stored = e.at("/event/data/stored");
        if (stored.isMissingNode()) continue;
        TreeSet<String> s =
            indexed.computeIfAbsent(e.path("worker_id").asLong(), k -> new TreeSet<>());
        for (JsonNode b : stored.path("blocks")) s.add(b.path("block_hash").asText());
      }
    }
    return indexed;
  }

  /** The problem line for engine {@code id} when the router's blocks differ from its, or null. */
  static String difference(long id, TreeSet<String> got, TreeSet<String> want) {
    if (got.equals(want)) return null;
    TreeSet<String> missing = new TreeSet<>(want);
    missing.removeAll(got);
    TreeSet<String> extra = new TreeSet<>(got);
    extra.removeAll(want);
    return String.format(
        Locale.ROOT,
        "engine %d: router holds %d blocks, engine %d (%d missing, %d extra)",
        id,
        got.size(),
        want.size(),
        missing.size(),
        extra.size());
  }

  private long lastSequence(String gateway, long instance) throws Exception {
    for (JsonNode w : reads.json(gateway + "/workers")) {
      if (w.path("instance_id").asLong() != instance) continue;
      for (JsonNode r : w.path("ranks")) return r.path("zmq").path("last_sequence").asLong(-2);
    }
    return -2;
  }
}
