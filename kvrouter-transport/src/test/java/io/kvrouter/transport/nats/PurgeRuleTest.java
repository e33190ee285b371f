package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;

import io.nats.client.api.ConsumerInfo;
import io.nats.client.support.JsonParser;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The purge floor, from consumer infos as the server reports them (no server needed). */
class PurgeRuleTest {
  private static final String SUBJECT = "kvrouter.events.m";

  private static ConsumerInfo consumer(
      String name,
      String filter,
      String deliverPolicy,
      long startSeq,
      long deliveredStream,
      long ackFloorStream,
      long ackPending) {
    String json =
        "{\"stream_name\":\"S\",\"name\":\""
            + name
            + "\",\"created\":\"2025-01-01T00:00:00Z\",\"config\":{\"durable_name\":\""
            + name
            + "\",\"deliver_policy\":\""
            + deliverPolicy
            + "\""
            + (startSeq > 0 ? ",\"opt_start_seq\":" + startSeq : "")
            + ",\"ack_policy\":\"explicit\""
            + (filter == null ? "" : ",\"filter_subject\":\"" + filter + "\"")
            + "},\"delivered\":{\"consumer_seq\":0,\"stream_seq\":"
            + deliveredStream
            + "},\"ack_floor\":{\"consumer_seq\":0,\"stream_seq\":"
            + ackFloorStream
            + "},\"num_ack_pending\":"
            + ackPending
            + ",\"num_redelivered\":0,\"num_waiting\":0,\"num_pending\":0}";
    return new ConsumerInfo(JsonParser.parseUnchecked(json));
  }

  @Test
  void aConsumerWithNothingAwaitingAnAckHasProcessedWhatWasDelivered() {
    assertThat(PurgeRule.processedThrough(consumer("c", SUBJECT, "all", 0, 40, 12, 0)))
        .isEqualTo(40);
  }

  @Test
  void aFreshConsumerCreatedAtAStartSequenceHasProcessedWhatCameBefore() {
    // the server's report for a consumer created at 5 that has not acked yet
    assertThat(PurgeRule.processedThrough(consumer("c", SUBJECT, "by_start_sequence", 5, 4, 0, 0)))
        .isEqualTo(4);
    assertThat(PurgeRule.processedThrough(consumer("c", SUBJECT, "by_start_sequence", 5, 9, 0, 3)))
        .as("messages in flight: the ack floor, at least the start")
        .isEqualTo(4);
  }

  @Test
  void aConsumerWithAcksPendingHasProcessedItsAckFloor() {
    assertThat(PurgeRule.processedThrough(consumer("c", SUBJECT, "all", 0, 40, 12, 5)))
        .isEqualTo(12);
  }

  @Test
  void thePurgeStopsAtTheSlowestOtherConsumerOfTheSubject() {
    List<ConsumerInfo> all =
        List.of(
            consumer("own", SUBJECT, "all", 0, 10, 10, 0),
            consumer("peer", SUBJECT, "all", 0, 90, 80, 2),
            consumer("other-model", "kvrouter.events.n", "all", 0, 0, 0, 0),
            consumer("monitor", "kvrouter.events.>", "all", 0, 95, 95, 0));
    assertThat(PurgeRule.purgeThrough(100, all, "own", SUBJECT))
        .as("own is skipped, other-model cannot see the subject")
        .isEqualTo(80);
    assertThat(PurgeRule.purgeThrough(60, all, "own", SUBJECT))
        .as("never past the snapshot")
        .isEqualTo(60);
    assertThat(
            PurgeRule.purgeThrough(
                100, List.of(consumer("whole-stream", null, "all", 0, 0, 0, 0)), "own", SUBJECT))
        .as("a consumer without filter that has seen nothing holds everything back")
        .isZero();
  }
}
