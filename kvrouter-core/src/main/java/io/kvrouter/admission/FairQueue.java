package io.kvrouter.admission;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;

/**
 * The queue in front of a saturated model (docs/routing.md, "Admission"): requests wait here, in
 * priority bands, shared among tenants by weighted fair queuing on what each request really costs,
 * until the gateway has room for one; what cannot wait is refused, never lost.
 *
 * <p>Order. Bands are served in strict order (band 0 first), except that a waiting lower band is
 * passed over at most {@link Config#starvationLimit()} times in a row (0: strict, it may wait for
 * ever). Within a band, tenants share by self-clocked fair queuing (Golestani 1994): a request of
 * cost {@code c} from a tenant of weight {@code w} gets the finish tag {@code max(V, tenant's last
 * tag) + c / w}, where {@code V} is the tag of the band's last dispatched request, and the band
 * serves the smallest tag among its tenants' oldest requests. Two tenants that both keep requests
 * waiting are therefore served in proportion to their weights, within one request's cost; one
 * tenant that sends ten times more only lengthens its own wait. A tenant's own requests leave in
 * arrival order.
 *
 * <p>Shares across bands ({@link Config#sharesSpanBands()}). Strict bands let a tenant's high-band
 * requests take capacity ahead of every lower-band request of every other tenant, so one tenant
 * that sends much high-priority work can delay all the others however fair each band is. With
 * shares spanning the bands, each tenant has one account for every band: its clock is the cost it
 * was served divided by its weight (virtual token counting), and a tenant that starts waiting is
 * lifted to the least clock among the tenants waiting (it does not bank what it did not use). A
 * tenant is within its share when its clock is at most the least waiting clock plus {@link
 * Config#shareSlack()}. The queue serves the highest band that holds a request of a tenant within
 * its share, and in it the tenant with the least clock (its oldest request of that band). So bands
 * are strict among tenants within their share, and a tenant over its share waits, whatever its
 * band, until the others caught up; the cost is charged at dispatch, so a cancelled request costs
 * nothing.
 *
 * <p>A tenant that sends far more ({@link Config#excessFactor()}). Fair queuing shares what the
 * fleet serves equally among the tenants that wait; when the fleet serves less than it should (a
 * cold cache under load), a light tenant's fair share can fall to about what it asks, and its
 * bursts then queue behind a tenant that sends ten times more. With an excess factor {@code k >=
 * 1}, each tenant's offer rate is kept: the requests it offered, divided by its weight, decaying by
 * e every {@link Config#maxWaitNanos()} (the queue's horizon). A waiting tenant whose rate exceeds
 * {@code k} times the mean of the other waiting tenants' rates waits behind them: the queue serves
 * the highest band that holds a tenant within that bound, and in it the first such tenant in tag
 * order (the tenant with the least rate is always within it). So bands stay strict among tenants
 * within the bound, and a tenant that sends far more than the others is served, in every band, only
 * with what they leave: the others' wait no longer depends on how much it sends, nor can it buy
 * precedence by marking its excess high priority. Tenants that send comparable amounts share by
 * tags as before. The rule counts what a tenant sends, not what waits nor what it costs: under fair
 * shares of cost, a tenant whose requests are dearer is served fewer of them and keeps more waiting
 * without sending more. The heavy tenant's own requests are bounded by the wait limit, as every
 * request is.
 *
 * <p>Cost. The caller charges what the engine will do: uncached prefill tokens (the prompt less the
 * router's predicted overlap) plus expected decode tokens. When the engine reports what it really
 * cached, {@link #charge} moves the difference onto the tenant's next tags, so a tenant whose
 * prompts turned out cheaper is not held back, nor a costlier one favoured.
 *
 * <p>Bounds. At most {@link Config#maxDepth()} requests wait at once (an offer beyond is refused);
 * {@link #expire} removes the requests that waited {@link Config#maxWaitNanos()}; {@link #cancel}
 * removes a request whose client left. Tenant names are client-chosen: a tenant is kept only while
 * it has requests waiting or a correction to carry, the latter for at most {@code 4 × maxDepth}
 * tenants (the oldest dropped first), so memory is bounded by the depth, not by the names.
 *
 * <pre>
 * Implementation notes
 *
 * Data: per band, a map tenant name -> Tenant (an ArrayDeque of live entries in arrival order, the
 * last tag given, the weight, a pending correction) and a TreeSet of the tenants with live entries
 * ordered by (head entry's tag, head entry's offer number); per band V (a double, the virtual time).
 * An arrival-ordered ArrayDeque of all entries drives expiry; entries leave it lazily (a dispatched
 * or cancelled entry is skipped). passedOver[b] counts dispatches from bands above b while b had
 * live entries.
 * Invariants: size == sum of live entries; a tenant is in its band's TreeSet iff it has a live
 * entry, keyed by its head's tag; tags along a tenant's deque increase; a cancelled entry's cost is
 * taken off the tags of the tenant's later entries, each tagged again from the virtual time it
 * arrived at (Ticket.floor) and its predecessor's tag, so cancelling leaves the others as if it had
 * never come, and a tenant whose requests expire in numbers does not get tags below the virtual
 * time (which would let it pass the tenants that wait less).
 * sharesSpanBands: the same per-band maps and deques, but a band's TreeSet orders its tenants by
 * (their Account's clock, head's offer number) and tags are unused; accounts maps the tenants with
 * requests waiting (any band) to their Account, and active holds those Accounts by (clock, id).
 * An Account exists iff its tenant has requests waiting (waiting > 0); a clock moves only through
 * reclock, which takes the account and its tenants out of the sorted sets and puts them back. An
 * account that stops waiting is dropped; its lead over the least waiting clock is kept in
 * idleDebts under band -1, and added to its clock when it waits again.
 * excessFactor > 0: waitingCount maps each tenant with requests waiting (every band) to their
 * count (offer adds, poll and cancel, so expire, take off; a tenant at 0 leaves); rates maps a
 * tenant to its offer rate (Rate: a value and the clock it was brought to; offer decays and adds),
 * access-ordered and bounded by 5 × maxDepth (the least recently offering dropped first: a
 * dropped tenant's rate counts as 0, as a tenant that sent nothing lately). clock is the latest
 * nowNanos given to offer or expire; poll brings every waiting tenant's rate to it (Rate.now, a
 * scratch value) and compares.
 * Threads: not thread-safe; the gateway holds one lock around each call (every call is O(log n) in
 * the waiting requests, or O(k) in one tenant's waiting requests for a cancel; with excessFactor,
 * poll also O(t) in the tenants waiting).
 * </pre>
 *
 * @param <T> what waits (the gateway's pending request)
 */
public final class FairQueue<T> {

  /**
   * How the queue is bounded and ordered.
   *
   * @param bands priority bands, at least 1; band 0 is served first
   * @param maxDepth requests waiting at once, at least 1
   * @param maxWaitNanos how long a request may wait before {@link #expire} removes it, > 0
   * @param starvationLimit a waiting band is passed over at most this many times in a row by higher
   *     bands; 0: strict priority
   * @param sharesSpanBands whether a tenant's share spans every band (one account per tenant,
   *     strict band order only among tenants within their share); false: shares within each band,
   *     strict order between bands
   * @param shareSlack with sharesSpanBands, how far (in cost units divided by weight) a tenant's
   *     account may be ahead of the least one waiting and still count as within its share, >= 0
   */
  public record Config(
      int bands,
      int maxDepth,
      long maxWaitNanos,
      int starvationLimit,
      boolean sharesSpanBands,
      double shareSlack,
      double excessFactor) {

    /** Shares within each band, strict order between bands (the original queue). */
    public Config(int bands, int maxDepth, long maxWaitNanos, int starvationLimit) {
      this(bands, maxDepth, maxWaitNanos, starvationLimit, false, 0, 0);
    }

    /** This configuration with tenant shares spanning the bands, {@code slack} cost units. */
    public Config withSharesSpanningBands(double slack) {
      return new Config(bands, maxDepth, maxWaitNanos, starvationLimit, true, slack, excessFactor);
    }

    /**
     * This configuration with the excess rule: a waiting tenant whose offer rate (requests per unit
     * of weight, decaying by e every maxWaitNanos) exceeds {@code factor} times the mean of the
     * other waiting tenants' waits behind them, in every band (0: off).
     */
    public Config withExcessFactor(double factor) {
      return new Config(
          bands, maxDepth, maxWaitNanos, starvationLimit, sharesSpanBands, shareSlack, factor);
    }

    public Config {
      if (!(shareSlack >= 0) || Double.isInfinite(shareSlack)) {
        throw new IllegalArgumentException("shareSlack must be finite and >= 0, got " + shareSlack);
      }
      if (!(excessFactor == 0 || excessFactor >= 1) || Double.isInfinite(excessFactor)) {
        throw new IllegalArgumentException(
            "excessFactor must be 0 (off) or finite and >= 1, got " + excessFactor);
      }
      if (excessFactor > 0 && sharesSpanBands) {
        throw new IllegalArgumentException(
            "the excess rule works on shares within each band; it cannot be combined with"
                + " shares that span the bands");
      }
      if (bands < 1) throw new IllegalArgumentException("bands must be >= 1, got " + bands);
      if (maxDepth < 1)
        throw new IllegalArgumentException("maxDepth must be >= 1, got " + maxDepth);
      if (maxWaitNanos <= 0) {
        throw new IllegalArgumentException("maxWaitNanos must be > 0, got " + maxWaitNanos);
      }
      if (starvationLimit < 0) {
        throw new IllegalArgumentException(
            "starvationLimit must be >= 0 (0: strict), got " + starvationLimit);
      }
    }
  }

  /** A waiting request: what {@link #offer} queued; {@link #cancel} takes it back. */
  public static final class Ticket<T> {
    private final T item;
    private final int band;
    private final Tenant<T> tenant;
    private final double cost;
    private final long arrivalNanos;
    private final long seq; // offer order: breaks ties between equal tags, first come first
    private double tag;
    private double floor; // the band's virtual time when it was offered
    private double charge; // cost + the correction it carried, in cost units
    private boolean live = true;

    private Ticket(T item, int band, Tenant<T> tenant, double cost, long arrivalNanos, long seq) {
      this.seq = seq;
      this.item = item;
      this.band = band;
      this.tenant = tenant;
      this.cost = cost;
      this.arrivalNanos = arrivalNanos;
    }

    /** What waits. */
    public T item() {
      return item;
    }

    /** Its band. */
    public int band() {
      return band;
    }

    /** Its tenant's name. */
    public String tenant() {
      return tenant.name;
    }

    /** When it was offered (the caller's clock). */
    public long arrivalNanos() {
      return arrivalNanos;
    }

    /** Whether it still waits (not dispatched, cancelled or expired). */
    public boolean isWaiting() {
      return live;
    }
  }

  private static final class Tenant<T> {
    final String name;
    final Account account; // sharesSpanBands: the tenant's one account; otherwise its own, unused
    double weight;
    double lastTag;
    double pending; // correction in cost units, applied to the next arrival's tag
    final ArrayDeque<Ticket<T>> entries = new ArrayDeque<>();

    Tenant(String name, double weight, Account account) {
      this.name = name;
      this.weight = weight;
      this.account = account;
    }

    double headTag() {
      return entries.peekFirst().tag;
    }
  }

  /**
   * sharesSpanBands: a tenant's account across the bands. clock is the cost served divided by
   * weight, lifted to the least waiting account's clock when the tenant starts waiting again.
   */
  private static final class Account {
    final String name;
    final long id; // breaks ties between equal clocks
    double clock;
    double weight;
    int waiting; // its requests waiting, every band

    Account(String name, long id, double clock, double weight) {
      this.name = name;
      this.id = id;
      this.clock = clock;
      this.weight = weight;
    }
  }

  private final class Band {
    final Map<String, Tenant<T>> tenants = new HashMap<>();
    final TreeSet<Tenant<T>> ready =
        new TreeSet<>(
            (a, b) -> {
              int c =
                  config.sharesSpanBands()
                      ? Double.compare(a.account.clock, b.account.clock)
                      : Double.compare(a.headTag(), b.headTag());
              return c != 0
                  ? c
                  : Long.compare(a.entries.peekFirst().seq, b.entries.peekFirst().seq);
            });
    double virtualTime;
    int live;
  }

  private final Config config;
  private final List<Band> bands = new ArrayList<>();
  private final int[] passedOver;
  private final boolean[]
      moved; // reclock's scratch: the bands whose ready set it took a tenant from
  private final ArrayDeque<Ticket<T>> byArrival = new ArrayDeque<>();
  // idle tenants that carry a correction, oldest first, bounded by 4 × maxDepth
  private final LinkedHashMap<String, Double> idleDebts = new LinkedHashMap<>();
  // excessFactor > 0: the tenants with requests waiting and how many (bounded by the depth); each
  // tenant's offer rate, least recently offering first, bounded by 5 x maxDepth
  private final Map<String, int[]> waitingCount = new HashMap<>();
  private final LinkedHashMap<String, Rate> rates = new LinkedHashMap<>(16, 0.75f, true);
  private long clock;

  /** A tenant's offer rate: requests / weight, decaying by e every maxWaitNanos. */
  private static final class Rate {
    double value; // at `at`
    long at;
    double now; // poll's scratch: value brought to the clock

    double at(long nowNanos, long horizon) {
      return nowNanos <= at ? value : value * Math.exp(-(double) (nowNanos - at) / horizon);
    }
  }

  private long offers;
  private int size;
  // sharesSpanBands: the accounts of the tenants with requests waiting, and the same by clock
  private final Map<String, Account> accounts = new HashMap<>();
  private final TreeSet<Account> active =
      new TreeSet<>(
          (a, b) -> {
            int c = Double.compare(a.clock, b.clock);
            return c != 0 ? c : Long.compare(a.id, b.id);
          });
  private double spanVirtualTime; // the clock the last dispatched request started at
  private long accountIds;

  /** An empty queue. */
  public FairQueue(Config config) {
    this.config = Objects.requireNonNull(config, "config");
    for (int b = 0; b < config.bands(); b++) bands.add(new Band());
    passedOver = new int[config.bands()];
    moved = new boolean[config.bands()];
  }

  /** The configuration. */
  public Config config() {
    return config;
  }

  /** Requests waiting. */
  public int size() {
    return size;
  }

  /** Requests waiting in {@code band}. */
  public int size(int band) {
    return bands.get(band).live;
  }

  /** Tenants kept (with requests waiting or a correction to carry): bounded by the depth. */
  public int tenantsKept() {
    int n = idleDebts.size() + rates.size();
    for (Band b : bands) n += b.tenants.size();
    return n;
  }

  /**
   * Queues {@code item}, or returns null when {@link Config#maxDepth()} requests already wait (the
   * caller refuses it: 429).
   *
   * @param band priority band, 0 first
   * @param tenant the tenant's name (client-chosen; bounded by the depth)
   * @param weight the tenant's share, > 0
   * @param cost what the request costs the engine (uncached prefill + expected decode tokens), >= 0
   * @param nowNanos the caller's clock
   */
  public @Nullable Ticket<T> offer(
      T item, int band, String tenant, double weight, double cost, long nowNanos) {
    Objects.requireNonNull(tenant, "tenant");
    if (band < 0 || band >= bands.size()) {
      throw new IllegalArgumentException(
          "band must be in 0.." + (bands.size() - 1) + ", got " + band);
    }
    if (!(weight > 0) || Double.isInfinite(weight)) {
      throw new IllegalArgumentException("weight must be finite and > 0, got " + weight);
    }
    if (!(cost >= 0) || Double.isInfinite(cost)) {
      throw new IllegalArgumentException("cost must be finite and >= 0, got " + cost);
    }
    if (size >= config.maxDepth()) return null;
    if (config.sharesSpanBands()) return offerSpanning(item, band, tenant, weight, cost, nowNanos);
    Band b = bands.get(band);
    Tenant<T> t = b.tenants.get(tenant);
    if (t == null) {
      t = new Tenant<>(tenant, weight, new Account(tenant, -1, 0, weight));
      t.lastTag = b.virtualTime;
      Double debt = idleDebts.remove(debtKey(band, tenant));
      if (debt != null) t.pending = debt;
      b.tenants.put(tenant, t);
    }
    t.weight = weight;
    Ticket<T> e = new Ticket<>(item, band, t, cost, nowNanos, offers++);
    boolean wasEmpty = t.entries.isEmpty();
    if (!wasEmpty) b.ready.remove(t);
    double start = Math.max(b.virtualTime, t.lastTag);
    e.floor = b.virtualTime;
    e.charge = cost + t.pending;
    e.tag = start + Math.max(0, e.charge / weight);
    t.pending = 0;
    t.lastTag = e.tag;
    t.entries.addLast(e);
    if (config.excessFactor() > 0) offered(tenant, weight, nowNanos);
    b.ready.add(t);
    b.live++;
    size++;
    byArrival.addLast(e);
    return e;
  }

  /** The next request to dispatch, removed from the queue; null when none waits. */
  public @Nullable Ticket<T> poll() {
    if (size == 0) return null;
    int chosen = -1;
    if (config.starvationLimit() > 0) {
      for (int b = bands.size() - 1; b >= 0; b--) {
        if (bands.get(b).live > 0 && passedOver[b] >= config.starvationLimit()) {
          chosen = b;
          break;
        }
      }
    }
    Tenant<T> light = null;
    if (chosen < 0 && config.excessFactor() > 0 && waitingCount.size() > 1) {
      // the excess rule: the first band holding a tenant within the bound, the first such tenant
      // in tag order (the tenant with the least rate is within it; rounding aside, one is found)
      final double total = bringRatesToClock();
      for (int b = 0; b < bands.size() && light == null; b++) {
        Band x = bands.get(b);
        if (x.live == 0) continue;
        for (Tenant<T> y : x.ready) {
          if (withinExcess(y.name, total)) {
            light = y;
            chosen = b;
            break;
          }
        }
      }
    }
    if (chosen < 0) {
      // sharesSpanBands: the first band whose least-served tenant is within its share; the least
      // waiting account's tenant is, in some band, so one is found
      double within = config.sharesSpanBands() ? active.first().clock + config.shareSlack() : 0;
      for (int b = 0; b < bands.size(); b++) {
        Band x = bands.get(b);
        if (x.live > 0 && (!config.sharesSpanBands() || x.ready.first().account.clock <= within)) {
          chosen = b;
          break;
        }
      }
    }
    for (int b = chosen + 1; b < bands.size(); b++) {
      if (bands.get(b).live > 0) passedOver[b]++;
    }
    passedOver[chosen] = 0;
    Band band = bands.get(chosen);
    Tenant<T> t;
    if (light != null) {
      band.ready.remove(light);
      t = light;
    } else {
      t = band.ready.pollFirst();
    }
    Ticket<T> e = t.entries.pollFirst();
    if (config.excessFactor() > 0) left(t.name);
    if (config.sharesSpanBands()) {
      Account acc = t.account;
      acc.waiting--;
      spanVirtualTime = acc.clock;
      e.charge = e.cost;
      reclock(acc, acc.clock + e.cost / acc.weight);
      afterRemoval(band, t);
      if (acc.waiting == 0) goIdle(acc);
    } else {
      band.virtualTime = Math.max(band.virtualTime, e.tag);
      afterRemoval(band, t);
    }
    e.live = false;
    band.live--;
    size--;
    return e;
  }

  /**
   * Takes back a waiting request (its client left); the tenant's later requests are tagged as if it
   * had never come. Returns false when it no longer waits.
   */
  public boolean cancel(Ticket<T> e) {
    if (!e.live) return false;
    Band band = bands.get(e.band);
    Tenant<T> t = e.tenant;
    band.ready.remove(t);
    if (config.sharesSpanBands()) {
      // nothing was charged yet: the account is as if e had never come
      t.entries.remove(e);
      afterRemoval(band, t);
      e.live = false;
      band.live--;
      size--;
      if (band.live == 0) passedOver[e.band] = 0;
      Account acc = t.account;
      if (--acc.waiting == 0) goIdle(acc);
      return true;
    }
    // the tenant's later requests are tagged again as if e had never come: each starts at the
    // larger of the virtual time it arrived at and its predecessor's tag (e's own start, where e
    // was); the correction e carried moves on to the next one
    double base = e.tag - Math.max(0, e.charge / t.weight);
    double carry = e.charge - e.cost;
    boolean after = false;
    for (Iterator<Ticket<T>> it = t.entries.iterator(); it.hasNext(); ) {
      Ticket<T> x = it.next();
      if (x == e) {
        it.remove();
        if (config.excessFactor() > 0) left(t.name);
        after = true;
        continue;
      }
      if (!after) continue;
      x.charge += carry;
      carry = 0;
      x.tag = Math.max(x.floor, base) + Math.max(0, x.charge / t.weight);
      base = x.tag;
    }
    t.pending += carry;
    t.lastTag = t.entries.isEmpty() ? base : t.entries.peekLast().tag;
    if (!t.entries.isEmpty()) band.ready.add(t);
    afterRemoval(band, t);
    e.live = false;
    band.live--;
    size--;
    if (band.live == 0) passedOver[e.band] = 0;
    return true;
  }

  /**
   * Removes and returns the requests that have waited {@link Config#maxWaitNanos()} by {@code
   * nowNanos}.
   */
  public List<Ticket<T>> expire(long nowNanos) {
    clock = Math.max(clock, nowNanos);
    List<Ticket<T>> out = new ArrayList<>();
    while (!byArrival.isEmpty()) {
      Ticket<T> e = byArrival.peekFirst();
      if (!e.live) {
        byArrival.pollFirst();
        continue;
      }
      if (nowNanos - e.arrivalNanos < config.maxWaitNanos()) break;
      byArrival.pollFirst();
      cancel(e);
      out.add(e);
    }
    // dispatched and cancelled entries leave the arrival queue lazily; keep it bounded
    if (byArrival.size() > 4 * config.maxDepth()) byArrival.removeIf(x -> !x.live);
    return out;
  }

  /**
   * Corrects a tenant's account once the engine reported what a request really cost: {@code delta}
   * cost units (actual minus charged; negative when the engine cached more than predicted) are
   * added to the tenant's next request in {@code band}.
   */
  public void charge(int band, String tenant, double delta) {
    if (!Double.isFinite(delta) || delta == 0) return;
    int key = band;
    if (config.sharesSpanBands()) {
      Account acc = accounts.get(tenant);
      if (acc != null) {
        reclock(acc, acc.clock + delta / acc.weight);
        return;
      }
      key = -1; // one correction per tenant, whatever the band
    } else {
      Tenant<T> t = bands.get(band).tenants.get(tenant);
      if (t != null) {
        t.pending += delta;
        return;
      }
    }
    idleDebts.merge(debtKey(key, tenant), delta, Double::sum);
    while (idleDebts.size() > 4 * config.maxDepth()) {
      idleDebts.remove(idleDebts.keySet().iterator().next());
    }
  }

  /** excessFactor > 0: a request of {@code tenant} (weight {@code weight}) waits from now. */
  private void offered(String tenant, double weight, long nowNanos) {
    clock = Math.max(clock, nowNanos);
    Rate r = rates.get(tenant);
    if (r == null) {
      r = new Rate();
      rates.put(tenant, r); // bounded below: client-chosen names do not grow memory
      while (rates.size() > 5 * config.maxDepth()) {
        rates.remove(rates.keySet().iterator().next());
      }
    }
    r.value = r.at(clock, config.maxWaitNanos()) + 1 / weight;
    r.at = Math.max(r.at, clock);
    int[] n = waitingCount.get(tenant);
    if (n == null) {
      n = new int[1];
      waitingCount.put(tenant, n);
    }
    n[0]++;
  }

  /** excessFactor > 0: a request of {@code tenant} no longer waits. */
  private void left(String tenant) {
    int[] n = Objects.requireNonNull(waitingCount.get(tenant), tenant);
    if (--n[0] == 0) waitingCount.remove(tenant);
  }

  /** Brings every waiting tenant's rate to the clock (Rate.now); returns their sum. */
  private double bringRatesToClock() {
    double total = 0;
    for (String name : waitingCount.keySet()) {
      Rate r = rates.get(name);
      if (r != null) {
        r.now = r.at(clock, config.maxWaitNanos());
        total += r.now;
      }
    }
    return total;
  }

  /**
   * Whether waiting {@code tenant} is within the bound: its rate at most excessFactor times the
   * mean of the other waiting tenants' rates ({@code total}: every waiting tenant's, brought to the
   * clock).
   */
  private boolean withinExcess(String tenant, double total) {
    Rate r = rates.get(tenant);
    double own = r == null ? 0 : r.now;
    return own <= config.excessFactor() * (total - own) / (waitingCount.size() - 1);
  }

  private static String debtKey(int band, String tenant) {
    return band + "\u0000" + tenant;
  }

  private @Nullable Ticket<T> offerSpanning(
      T item, int band, String tenant, double weight, double cost, long nowNanos) {
    Band b = bands.get(band);
    Account acc = accounts.get(tenant);
    if (acc == null) {
      // a tenant that starts waiting is lifted to the least waiting clock: it does not bank what
      // it did not use, and carries what it owes (a positive lead or a correction)
      double clock = active.isEmpty() ? spanVirtualTime : active.first().clock;
      Double debt = idleDebts.remove(debtKey(-1, tenant));
      if (debt != null) clock += debt / weight;
      acc = new Account(tenant, accountIds++, clock, weight);
      accounts.put(tenant, acc);
      active.add(acc);
    }
    acc.weight = weight;
    Tenant<T> t = b.tenants.get(tenant);
    if (t == null) {
      t = new Tenant<>(tenant, weight, acc);
      b.tenants.put(tenant, t);
    }
    Ticket<T> e = new Ticket<>(item, band, t, cost, nowNanos, offers++);
    e.charge = cost;
    if (t.entries.isEmpty()) {
      t.entries.addLast(e);
      b.ready.add(t);
    } else {
      t.entries.addLast(e); // the head, and so the tenant's place in b.ready, is unchanged
    }
    acc.waiting++;
    b.live++;
    size++;
    byArrival.addLast(e);
    return e;
  }

  /** Moves {@code acc}'s clock, keeping the ordered sets that hold it (or its tenants) sorted. */
  private void reclock(Account acc, double clock) {
    boolean wasActive = active.remove(acc);
    for (int i = 0; i < bands.size(); i++) {
      Band b = bands.get(i);
      Tenant<T> x = b.tenants.get(acc.name);
      moved[i] = x != null && !x.entries.isEmpty() && b.ready.remove(x);
    }
    acc.clock = clock;
    for (int i = 0; i < bands.size(); i++) {
      if (moved[i]) {
        Band b = bands.get(i);
        b.ready.add(Objects.requireNonNull(b.tenants.get(acc.name)));
      }
    }
    if (wasActive) active.add(acc);
  }

  /**
   * An account with nothing waiting is dropped; its lead over the least waiting clock (what it
   * owes) is kept as a correction, bounded as the others.
   */
  private void goIdle(Account acc) {
    active.remove(acc);
    accounts.remove(acc.name);
    double ref = active.isEmpty() ? spanVirtualTime : active.first().clock;
    double lead = acc.clock - ref;
    if (lead > 0) charge(-1, acc.name, lead * acc.weight);
  }

  private void afterRemoval(Band band, Tenant<T> t) {
    // the callers have taken t out of band.ready before changing its head
    if (t.entries.isEmpty()) {
      band.tenants.remove(t.name);
      if (t.pending != 0) {
        int b = bands.indexOf(band);
        charge(b, t.name, t.pending);
      }
    } else if (!band.ready.contains(t)) {
      band.ready.add(t);
    }
  }
}
