package io.kvrouter.transport.zmq;

import io.kvrouter.transport.CounterSnapshotCheck;
import org.junit.jupiter.api.Test;

class CountersTest {
  @Test
  void eachCounterReadsIntoTheIngestStatsComponentOfItsName() throws Exception {
    CounterSnapshotCheck.eachSlotReadsIntoItsComponent(
        Counters.C.class, IngestStats.class, Counters::snapshot);
  }
}
