package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Replays the op streams of {@code oracle/} (copied from the shared oracle) into every index kind
 * and compares each match with the answer NVIDIA Dynamo's indexers gave.
 */
class OracleStreamsTest {
  private static final String[] CORPORA = {"corpus-nohole-small", "corpus-nohole-dp2"};
  private static final ObjectMapper JSON = new ObjectMapper();

  @TestFactory
  Stream<DynamicTest> everyKindGivesDynamosAnswers() {
    List<DynamicTest> tests = new ArrayList<>();
    List<Supplier<KvIndex>> kinds = IndexKinds.suppliers();
    for (String corpus : CORPORA) {
      for (int k = 0; k < kinds.size(); k++) {
        Supplier<KvIndex> kind = kinds.get(k);
        tests.add(DynamicTest.dynamicTest(corpus + " kind #" + k, () -> replay(corpus, kind)));
      }
    }
    return tests.stream();
  }

  private static List<String> lines(String resource) throws IOException {
    try (BufferedReader r =
        new BufferedReader(
            new InputStreamReader(
                OracleStreamsTest.class.getResourceAsStream("/oracle/" + resource),
                StandardCharsets.UTF_8))) {
      return r.lines().toList();
    }
  }

  private static long u64(JsonNode n) {
    return Long.parseUnsignedLong(n.asText());
  }

  private static void replay(String corpus, Supplier<KvIndex> kind) throws IOException {
    List<String> ops = lines(corpus + ".jsonl");
    List<String> answers = lines(corpus + ".radix.out");
    int matches = 0;
    long eventId = 0;
    try (KvIndex index = kind.get()) {
      for (int lineNo = 1; lineNo <= ops.size(); lineNo++) {
        JsonNode op = JSON.readTree(ops.get(lineNo - 1));
        String type = op.get("op").asText();
        Worker w =
            op.has("worker")
                ? new Worker(
                    u64(op.get("worker")), op.has("dp_rank") ? op.get("dp_rank").asInt() : 0)
                : null;
        switch (type) {
          case "store" -> {
            JsonNode blocks = op.get("blocks");
            long[] locals = new long[blocks.size()];
            long[] seqs = new long[blocks.size()];
            for (int i = 0; i < locals.length; i++) {
              locals[i] = u64(blocks.get(i).get(0));
              seqs[i] = u64(blocks.get(i).get(1));
            }
            JsonNode parent = op.get("parent");
            CacheEvent ev =
                parent == null || parent.isNull()
                    ? CacheEvent.storedAtRoot(seqs, locals)
                    : CacheEvent.stored(u64(parent), seqs, locals);
            index.apply(new RouterEvent(w, eventId++, ev));
          }
          case "remove" -> {
            JsonNode blocks = op.get("blocks");
            long[] seqs = new long[blocks.size()];
            for (int i = 0; i < seqs.length; i++) seqs[i] = u64(blocks.get(i));
            index.apply(new RouterEvent(w, eventId++, CacheEvent.removed(seqs)));
          }
          case "clear" -> index.clearWorker(w.workerId());
          case "remove_worker" -> index.removeWorker(w.workerId());
          case "match" -> {
            JsonNode ls = op.get("locals");
            long[] q = new long[ls.size()];
            for (int i = 0; i < q.length; i++) q[i] = u64(ls.get(i));
            boolean early = op.has("early_exit") && op.get("early_exit").asBoolean();
            index.flush();
            JsonNode answer = JSON.readTree(answers.get(matches));
            assertThat(answer.get("line").asInt()).isEqualTo(lineNo);
            Map<String, Integer> want = new TreeMap<>();
            answer
                .get("scores")
                .fields()
                .forEachRemaining(e -> want.put(e.getKey(), e.getValue().asInt()));
            OverlapScores got = index.findMatches(q, early);
            Map<String, Integer> gotByKey = new TreeMap<>();
            for (int i = 0; i < got.size(); i++) {
              gotByKey.put(got.worker(i).toString(), got.scoreAt(i));
            }
            assertThat(gotByKey).as("%s line %d", corpus, lineNo).isEqualTo(want);
            matches++;
          }
          default -> throw new IllegalStateException("unknown op " + type + " at line " + lineNo);
        }
      }
      assertThat(matches).isEqualTo(answers.size());
    }
  }
}
