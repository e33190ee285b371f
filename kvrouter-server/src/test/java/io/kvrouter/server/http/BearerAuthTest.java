package io.kvrouter.server.http;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The bearer token check of the mutating endpoints (its use: ServiceErrorsTest). */
class BearerAuthTest {

  @Test
  void bearerComparisonAcceptsOnlyTheExactToken() {
    BearerAuth auth = new BearerAuth("tok");
    assertThat(auth.enabled()).isTrue();
    assertThat(auth.permits("Bearer tok")).isTrue();
    assertThat(auth.permits("bearer tok")).isTrue();
    assertThat(auth.permits("Bearer tok ")).isTrue();
    assertThat(auth.permits("Bearer to")).isFalse();
    assertThat(auth.permits("Bearer tokk")).isFalse();
    assertThat(auth.permits("Basic tok")).isFalse();
    assertThat(auth.permits("Bearer")).isFalse();
    assertThat(auth.permits(null)).isFalse();
    BearerAuth off = new BearerAuth("");
    assertThat(off.enabled()).isFalse();
    assertThat(off.permits(null)).isTrue();
  }
}
