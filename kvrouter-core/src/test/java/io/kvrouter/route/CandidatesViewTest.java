package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.Worker;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The column views of one decision: {@link Candidates}' per-term accessors agree with the records
 * {@code get(i)} builds, and {@link RouteDecision.Routed#candidates()} as the router returns it (a
 * lazily built view) is unmodifiable, stable and equal to a plain copy.
 */
class CandidatesViewTest {
  private static final int BS = 4;

  @Test
  void columnsAgreeWithTheRecords() {
    List<Candidate> list =
        List.of(
            new Candidate(Worker.of(1), 0, 0, 8.0, 10),
            new Candidate(Worker.of(2), 3, 7, 5.5, 5),
            new Candidate(new Worker(2, 1), 1, 2, 2.25, 9));
    Candidates c = Candidates.of(list, 4, new double[] {0, 1.5, 0.25});
    assertThat(c).containsExactlyElementsOf(list);
    for (int i = 0; i < list.size(); i++) {
      Candidate e = list.get(i);
      assertThat(c.worker(i)).isEqualTo(e.worker());
      assertThat(c.overlapBlocks(i)).isEqualTo(e.overlapBlocks());
      assertThat(c.cachedBlocks(i)).isEqualTo(e.cachedBlocks());
      assertThat(c.prefillBlocks(i)).isEqualTo(e.prefillBlocks());
      assertThat(c.decodeBlocks(i)).isEqualTo(e.decodeBlocks());
    }
    assertThatThrownBy(() -> c.decodeBlocks(3)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> c.worker(-1)).isInstanceOf(IndexOutOfBoundsException.class);
  }

  @Test
  void theRoutersViewIsUnmodifiableStableAndEqualToACopy() {
    KvRouter router = KvRouter.builder(BS).build();
    for (int w = 1; w <= 5; w++) router.registerWorker(w, 1, BS);
    router.route(
        "busy", KvRouterTest.tokens(100, 12), RouteOptions.defaults().withAllowedWorkers(3));
    List<Candidate> seen = new ArrayList<>();
    RouteDecision.Routed d =
        KvRouterTest.routed(router.route("r", KvRouterTest.tokens(1, 16), RouteOptions.defaults()));
    List<CandidateCost> view = d.candidates();
    assertThat(view).hasSize(5);
    assertThat(view.get(2)).isSameAs(view.get(2));
    assertThat(view.get(2).candidate().decodeBlocks()).isEqualTo(3 + 4); // 3 active + 4 new
    assertThat(view.get(0).candidate().decodeBlocks()).isEqualTo(4);
    for (CandidateCost c : view) seen.add(c.candidate());
    assertThat(seen).extracting(Candidate::worker).isSortedAccordingTo(Worker::compareTo);
    List<CandidateCost> copy = List.copyOf(view);
    assertThat(view).isEqualTo(copy);
    assertThat(view.hashCode()).isEqualTo(copy.hashCode());
    assertThat(
            new RouteDecision.Routed(
                d.worker(), d.overlapBlocks(), d.overlapTokens(), copy, d.busy()))
        .isEqualTo(d);
    assertThat(d.cost()).isEqualTo(find(copy, d.worker()).cost());
    assertThatThrownBy(() -> view.add(copy.get(0)))
        .isInstanceOf(UnsupportedOperationException.class);
    assertThatThrownBy(() -> view.set(0, copy.get(0)))
        .isInstanceOf(UnsupportedOperationException.class);
    assertThatThrownBy(() -> view.remove(0)).isInstanceOf(UnsupportedOperationException.class);
    assertThatThrownBy(() -> view.get(5)).isInstanceOf(IndexOutOfBoundsException.class);
  }

  private static CandidateCost find(List<CandidateCost> l, Worker w) {
    for (CandidateCost c : l) if (c.worker().equals(w)) return c;
    throw new AssertionError(w);
  }
}
