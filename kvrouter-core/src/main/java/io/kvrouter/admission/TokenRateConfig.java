package io.kvrouter.admission;

import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Per-tenant token-rate limits (docs/gateway.md, "Token-rate limits"): each tenant (as {@code
 * --tenant-from} names it) has a token bucket that refills at its rate and holds {@code burst}'s
 * worth of it; a request costs its uncached prefill tokens (as the router predicts them) plus its
 * expected decode tokens, and one its tenant's bucket cannot pay is refused with 429 {@code
 * rate_limit_exceeded}.
 *
 * @param defaultRate tokens per second of every tenant not in {@code tenantRates}; 0: those tenants
 *     are not limited
 * @param tenantRates tenant name to its tokens per second (> 0)
 * @param burst how many seconds' worth of its rate a tenant's bucket holds (at least one token)
 * @param maxTenants tenants whose buckets are kept at once; past it the least used are dropped (and
 *     start again full), so client-chosen tenant names cannot grow memory without bound
 */
public record TokenRateConfig(
    double defaultRate, Map<String, Double> tenantRates, Duration burst, int maxTenants) {

  /** No limits (bursts of 10 s, 100,000 tenants kept, when some are set). */
  public static final TokenRateConfig OFF =
      new TokenRateConfig(0, Map.of(), Duration.ofSeconds(10), 100_000);

  public TokenRateConfig {
    if (!(defaultRate >= 0) || Double.isInfinite(defaultRate)) {
      throw new IllegalArgumentException(
          "the default token rate must be finite and >= 0 (0: none), got " + defaultRate);
    }
    for (Map.Entry<String, Double> e : tenantRates.entrySet()) {
      double r = e.getValue();
      if (!(r > 0) || Double.isInfinite(r)) {
        throw new IllegalArgumentException(
            "the token rate of tenant '" + e.getKey() + "' must be finite and > 0, got " + r);
      }
    }
    tenantRates = Collections.unmodifiableMap(new LinkedHashMap<>(tenantRates));
    Objects.requireNonNull(burst, "burst");
    if (burst.isNegative() || burst.isZero()) {
      throw new IllegalArgumentException("the token burst must be > 0, got " + burst);
    }
    if (maxTenants < 1) {
      throw new IllegalArgumentException("maxTenants must be >= 1, got " + maxTenants);
    }
  }

  /** Whether any tenant is limited. */
  public boolean on() {
    return defaultRate > 0 || !tenantRates.isEmpty();
  }

  /** A tenant's tokens per second; 0: not limited. */
  public double rate(String tenant) {
    Double r = tenantRates.get(tenant);
    return r == null ? defaultRate : r;
  }

  /** The tokens a bucket of rate {@code rate} holds: {@code burst} seconds' worth, at least 1. */
  public double burstTokens(double rate) {
    return Math.max(1, rate * (burst.toNanos() / 1e9));
  }
}
