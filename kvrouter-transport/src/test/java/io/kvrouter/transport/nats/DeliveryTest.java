package io.kvrouter.transport.nats;

import static io.kvrouter.transport.nats.ConsumeLoop.Delivery.DUPLICATE;
import static io.kvrouter.transport.nats.ConsumeLoop.Delivery.GAP;
import static io.kvrouter.transport.nats.ConsumeLoop.Delivery.NEW;
import static io.kvrouter.transport.nats.ConsumeLoop.classify;
import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** How a replica classifies a delivery by its consumer and stream sequences (no server). */
class DeliveryTest {

  @Test
  void theNextDeliveryOfANewerMessageIsApplied() {
    assertThat(classify(1, 0, 1, 1)).isEqualTo(NEW);
    // a filtered subject: stream sequences of the subject need not be contiguous
    assertThat(classify(5, 40, 5, 57)).isEqualTo(NEW);
  }

  @Test
  void aRedeliveryOfAnAppliedMessageIsADuplicate() {
    // applied through 57; the server redelivers 41 as the consumer's 9th delivery
    assertThat(classify(9, 57, 9, 41)).isEqualTo(DUPLICATE);
    assertThat(classify(9, 57, 9, 57)).isEqualTo(DUPLICATE);
  }

  @Test
  void aJumpInTheConsumerSequenceIsAGapEvenForANewerMessage() {
    assertThat(classify(9, 57, 12, 60)).isEqualTo(GAP);
    assertThat(classify(9, 57, 10, 41)).as("a gap wins over a duplicate").isEqualTo(GAP);
  }

  @Test
  void anEarlierConsumerSequenceIsNoGap() {
    // cannot happen with one consumer; treated by the stream sequence alone
    assertThat(classify(9, 57, 3, 58)).isEqualTo(NEW);
    assertThat(classify(9, 57, 3, 50)).isEqualTo(DUPLICATE);
  }
}
