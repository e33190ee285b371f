package io.kvrouter.gateway;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.kvrouter.admission.TokenBucket;
import io.kvrouter.admission.TokenRateConfig;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.LongSupplier;
import org.jspecify.annotations.Nullable;

/**
 * The per-tenant token-rate limits (docs/gateway.md, "Token-rate limits"): a {@link TokenBucket}
 * per tenant, refilling at the tenant's {@link TokenRateConfig#rate}, holding {@link
 * TokenRateConfig#burstTokens}.
 *
 * <pre>
 * Implementation notes
 *
 * Data: a Caffeine cache, tenant name to its bucket, bounded by maxTenants (its maintenance runs
 * on the calling thread, so the bound holds when a call returns); a tenant dropped from it starts
 * again with a full bucket. Tenants without a limit (no default rate, not listed) get no bucket
 * and no cache lookup.
 *
 * Who writes: request threads, through the buckets (lock-free compare-and-set) and the cache's
 * get (which makes a bucket on a tenant's first request). Who reads: the same.
 *
 * The hot path: one cache lookup and one compare-and-set per request of a limited tenant; the
 * bucket factory is a field, so the lookup allocates nothing once the tenant has its bucket.
 * </pre>
 */
final class TenantRates {
  private final TokenRateConfig config;
  private final LongSupplier clock;
  private final Cache<String, TokenBucket> buckets;
  private final Function<String, TokenBucket> make = this::make;

  TenantRates(TokenRateConfig config, LongSupplier nanoClock) {
    this.config = config;
    this.clock = nanoClock;
    this.buckets =
        Caffeine.newBuilder().maximumSize(config.maxTenants()).executor(Runnable::run).build();
  }

  TokenRateConfig config() {
    return config;
  }

  private TokenBucket make(String tenant) {
    double rate = config.rate(tenant);
    return new TokenBucket(rate, config.burstTokens(rate), clock);
  }

  /** The bucket of {@code tenant}, made on its first request; null: the tenant is not limited. */
  @Nullable TokenBucket bucket(String tenant) {
    if (!(config.rate(tenant) > 0)) return null;
    return buckets.get(tenant, make);
  }

  /** Tenants with a bucket now (after the cache's pending maintenance). */
  long tenants() {
    buckets.cleanUp();
    return buckets.estimatedSize();
  }

  /** Retry-After, in whole seconds, for a wait of {@code nanos}: rounded up, at least 1. */
  static long retryAfterSeconds(long nanos) {
    long s = nanos / TimeUnit.SECONDS.toNanos(1);
    if (nanos % TimeUnit.SECONDS.toNanos(1) != 0) s++;
    return Math.max(1, s);
  }

  /**
   * The 429 of a request its tenant's bucket cannot pay, in OpenAI's shape for a token rate limit
   * (type {@code tokens}, code {@code rate_limit_exceeded}).
   */
  OpenAiError refusal(String tenant, long cost, TokenBucket b, long waitNanos) {
    double rate = config.rate(tenant);
    return new OpenAiError(
        429,
        "tokens",
        "rate_limit_exceeded",
        null,
        "Rate limit reached for tenant '"
            + tenant
            + "' on tokens per second: limit "
            + fmt(rate)
            + "/s, burst "
            + fmt(b.burst())
            + ", available "
            + fmt(Math.floor(b.available()))
            + ", requested "
            + cost
            + " (uncached prompt tokens + max_tokens). Please try again in "
            + fmtSeconds(waitNanos)
            + " (--tenant-token-rate).");
  }

  private static String fmt(double v) {
    return v == Math.rint(v) && Math.abs(v) < 1e15 ? Long.toString((long) v) : Double.toString(v);
  }

  private static String fmtSeconds(long nanos) {
    return String.format(Locale.ROOT, "%.3fs", nanos / 1e9);
  }
}
