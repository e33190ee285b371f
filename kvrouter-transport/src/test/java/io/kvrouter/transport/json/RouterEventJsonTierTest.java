package io.kvrouter.transport.json;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.kvevents.TieredEvent;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Dynamo's {@code storage_tier} on the outer RouterEvent (protocols.rs {@code StorageTier}, serde
 * snake_case, {@code #[serde(default)]} device): decoded by readTieredEvents, an error when it is
 * not one of the four names.
 */
class RouterEventJsonTierTest {
  private static final String REMOVED =
      "\"event\":{\"event_id\":3,\"data\":{\"removed\":{\"block_hashes\":[5]}},\"dp_rank\":1}";

  private static List<TieredEvent> read(String json) {
    return RouterEventJson.readTieredEvents(json.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void eachOfDynamosTierNamesAndTheDefault() {
    List<TieredEvent> got =
        read(
            "[{\"worker_id\":7,"
                + REMOVED
                + "},{\"worker_id\":7,\"storage_tier\":\"host_pinned\","
                + REMOVED
                + "},{\"worker_id\":7,"
                + REMOVED
                + ",\"storage_tier\":\"disk\"},{\"storage_tier\":\"external\",\"worker_id\":7,"
                + REMOVED
                + "},{\"worker_id\":7,\"storage_tier\":\"device\","
                + REMOVED
                + "}]");
    RouterEvent e = new RouterEvent(new Worker(7, 1), 3, CacheEvent.removed(new long[] {5}));
    assertThat(got)
        .containsExactly(
            new TieredEvent(StorageTier.DEVICE, e),
            new TieredEvent(StorageTier.HOST, e),
            new TieredEvent(StorageTier.DISK, e),
            new TieredEvent(StorageTier.EXTERNAL, e),
            new TieredEvent(StorageTier.DEVICE, e));
    // the device-only readers skip it, whatever its shape
    assertThat(
            RouterEventJson.readEvents(
                "[{\"worker_id\":7,\"storage_tier\":\"host_pinned\","
                    + REMOVED
                    + "},"
                    + "{\"worker_id\":7,\"storage_tier\":\"CPU\","
                    + REMOVED
                    + "}]"))
        .containsExactly(e, e);
  }

  @Test
  void anythingElseIsAnErrorNamingTheField() {
    for (String bad : new String[] {"\"CPU\"", "\"host\"", "null", "1", "{}", "[\"disk\"]"}) {
      assertThatThrownBy(
              () -> read("[{\"worker_id\":7,\"storage_tier\":" + bad + "," + REMOVED + "}]"))
          .as(bad)
          .isInstanceOf(EventDecodeException.class)
          .hasMessageContaining("storage_tier")
          .hasMessageContaining("host_pinned");
    }
    assertThatThrownBy(
            () ->
                read(
                    "[{\"worker_id\":7,\"storage_tier\":\"disk\",\"storage_tier\":\"disk\","
                        + REMOVED
                        + "}]"))
        .isInstanceOf(EventDecodeException.class)
        .hasMessageContaining("storage_tier");
  }

  @Test
  void theTieredWritersPutTheTierFirstAndLeaveItOutForTheDevice() {
    RouterEvent stored =
        new RouterEvent(
            new Worker(7, 1), 4, CacheEvent.storedAtRoot(new long[] {-1}, new long[] {9}));
    // a device event is written as the untiered writer writes it (the stream's records before
    // tiers look the same)
    assertThat(RouterEventJson.writeEvent(StorageTier.DEVICE, stored))
        .isEqualTo(RouterEventJson.writeEvent(stored));
    assertThat(RouterEventJson.writeEvent(StorageTier.DISK, stored))
        .isEqualTo("{\"storage_tier\":\"disk\"," + RouterEventJson.writeEvent(stored).substring(1));
    List<TieredEvent> all = new ArrayList<>();
    for (StorageTier t : StorageTier.values()) all.add(new TieredEvent(t, stored));
    assertThat(read(RouterEventJson.writeTieredEvents(all))).isEqualTo(all);
    for (TieredEvent te : all) {
      assertThat(
              RouterEventJson.readTieredEvent(RouterEventJson.writeEventBytes(te.tier(), stored)))
          .isEqualTo(te);
    }
    assertThat(
            RouterEventJson.readTieredEvent(
                RouterEventJson.writeEventBytes(stored))) // an old record: device
        .isEqualTo(new TieredEvent(StorageTier.DEVICE, stored));
  }
}
