// SideBySide: ConcurrentHashMap and Caffeine on the workloads of the Swift MemoryStoreBenchmark
// (read1, read2, mixed2, write1), with the same keys, values and pre-generated access pattern.
// Run it with Benchmarks/JVM/run (see README.md beside it). Each store is measured in a JVM of
// its own (this program started again with --child STORE), so that the JIT's profile of one
// store's classes never slows down the next store's loops.

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.io.*;
import java.lang.management.ManagementFactory;
import java.lang.ProcessBuilder.Redirect;
import java.nio.file.Path;
import java.util.*;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

public final class SideBySide {
  static final List<String> WORKLOADS = List.of("read1", "read2", "mixed2", "write1");
  static final List<String> STORES =
      List.of("chm", "caffeine", "caffeine-limited", "caffeine-evicting", "caffeine-ttl");
  static final int KEYS = 10_000;
  static final long SEED = 0x4D65_6D53_746F_7265L; // The Swift benchmark's seed ("MemStore").
  static final int WRITE_PERCENT = 10, WRITE_BIT = 0x8000_0000, INDEX_MASK = 0x7FFF_FFFF;
  static final int WARMUP_OPS = 1_000_000; // Untimed ops per lane before a cell is measured.

  /// The value, like the Swift `Quote` (which is a 24-byte struct; here each is an object).
  record Quote(double bid, double ask, long volume) {
    static Quote initial(int i) { return new Quote(100 + i, 100.05 + i, -1 - i); }
    static Quote written(int op) { return new Quote(op, op + 0.05, op); }
  }

  /// SplitMix64 exactly as KeyStream.swift: same constants, same Lemire bounded draw.
  static final class SplitMix64 {
    private long state;
    SplitMix64(long seed) { state = seed; }

    long next() {
      long z = (state += 0x9E37_79B9_7F4A_7C15L);
      z = (z ^ (z >>> 30)) * 0xBF58_476D_1CE4_E5B9L;
      z = (z ^ (z >>> 27)) * 0x94D0_49BB_1331_11EBL;
      return z ^ (z >>> 31);
    }

    /// Uniform in 0..<bound: the top 32 bits times bound, rejecting the biased low products.
    int nextBelow(int bound) {
      long product = (next() >>> 32) * bound; // < 2^64: read as unsigned below.
      if (Integer.compareUnsigned((int) product, bound) < 0) {
        int threshold = Integer.remainderUnsigned(-bound, bound); // (2^32 - bound) % bound
        while (Integer.compareUnsigned((int) product, threshold) < 0)
          product = (next() >>> 32) * bound;
      }
      return (int) (product >>> 32);
    }
  }

  /// Two lanes of ops, as AccessPattern in KeyStream.swift: a seeder gives each lane its seed,
  /// each op draws a key index, then a draw below 100 decides the write mark. Swift generates
  /// 2^21 ops per lane; a longer run here extends the same streams instead of wrapping.
  static int[][] accessPattern(int length) {
    SplitMix64 seeder = new SplitMix64(SEED);
    int[][] lanes = new int[2][]; // Lanes 0 and 1; one-thread workloads use lane 0.
    for (int lane = 0; lane < 2; lane++) {
      SplitMix64 rng = new SplitMix64(seeder.next());
      int[] ops = new int[length];
      for (int i = 0; i < length; i++) {
        int index = rng.nextBelow(KEYS); // First the key, then the write mark's draw.
        ops[i] = index | (rng.nextBelow(100) < WRITE_PERCENT ? WRITE_BIT : 0);
      }
      lanes[lane] = ops;
    }
    return lanes;
  }

  /// What the timed loops need from a store. drain() is the flush the Swift benchmark includes
  /// at the end of each writing lane: Caffeine's cleanUp(), a no-op for ConcurrentHashMap.
  interface Store { Quote get(String key); void put(String key, Quote value); void drain(); }

  static Store makeStore(String name) {
    if (name.equals("chm")) {
      ConcurrentHashMap<String, Quote> map = new ConcurrentHashMap<>();
      return new Store() {
        public Quote get(String k) { return map.get(k); }
        public void put(String k, Quote v) { map.put(k, v); }
        public void drain() {}
      };
    }
    Caffeine<Object, Object> builder = Caffeine.newBuilder(); // Default executor and ticker.
    switch (name) {
      case "caffeine" -> {}
      case "caffeine-limited" -> builder.maximumSize(20_000); // Above the key count: no eviction.
      case "caffeine-evicting" -> builder.maximumSize(5_000); // Half the keys: writes evict.
      case "caffeine-ttl" -> builder.expireAfterWrite(1, TimeUnit.HOURS);
      default -> throw new IllegalArgumentException("unknown store " + name);
    }
    Cache<String, Quote> cache = builder.build();
    return new Store() {
      public Quote get(String k) { return cache.getIfPresent(k); }
      public void put(String k, Quote v) { cache.put(k, v); }
      public void drain() { cache.cleanUp(); }
    };
  }

  static volatile long sink; // Read checksums land here, so no read is optimised away.

  // The timed loops, one per kind of lane, as in Workloads.swift.
  static long getLoop(Store s, String[] keys, int[] ops, int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) sum += volume(s.get(keys[ops[i] & INDEX_MASK]));
    return sum;
  }

  static long volume(Quote q) { return q != null ? q.volume() : 1; } // A miss counts 1.

  static long putLoop(Store s, String[] keys, int[] ops, int n) {
    for (int i = 0; i < n; i++) s.put(keys[ops[i] & INDEX_MASK], Quote.written(i));
    return 0;
  }

  static long mixedLoop(Store s, String[] keys, int[] ops, int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
      int op = ops[i];
      String k = keys[op & INDEX_MASK];
      if ((op & WRITE_BIT) != 0) s.put(k, Quote.written(i)); else sum += volume(s.get(k));
    }
    return sum;
  }

  /// One repetition on a fresh, pre-populated store; returns the lanes' mean ns/op, each lane
  /// timed from the common start line to its own end (writing lanes include drain()).
  static double repetition(String storeName, String workload, int n, int[][] pattern,
      String[] keys) throws InterruptedException {
    Store store = makeStore(storeName);
    for (int i = 0; i < KEYS; i++) store.put(keys[i], Quote.initial(i));
    store.drain(); // The evicting store settles at its limit before the clock starts.
    int laneCount = workload.endsWith("2") ? 2 : 1; // read2 and mixed2 have two lanes.
    AtomicInteger arrived = new AtomicInteger();
    double[] nanosPerOp = new double[laneCount];
    Thread[] threads = new Thread[laneCount]; // Always new threads, even for one lane.
    for (int lane = 0; lane < laneCount; lane++) {
      final int l = lane;
      String[] laneKeys = new String[KEYS]; // Each lane has its own key objects.
      for (int i = 0; i < KEYS; i++) laneKeys[i] = new String(keys[i]);
      int[] ops = pattern[lane];
      threads[lane] = new Thread(() -> {
        arrived.incrementAndGet();
        while (arrived.get() < laneCount) Thread.onSpinWait(); // The start line.
        long start = System.nanoTime();
        long sum = switch (workload) {
          case "read1", "read2" -> getLoop(store, laneKeys, ops, n);
          case "mixed2" -> mixedLoop(store, laneKeys, ops, n);
          default -> putLoop(store, laneKeys, ops, n);
        };
        if (!workload.startsWith("read")) store.drain();
        nanosPerOp[l] = (double) (System.nanoTime() - start) / n;
        sink += sum;
      });
    }
    for (Thread t : threads) t.start();
    for (Thread t : threads) t.join();
    // Outside the timing: a store that should never evict must still hold every key.
    for (int i = 0; i < KEYS && !storeName.equals("caffeine-evicting"); i++)
      if (store.get(keys[i]) == null) throw new IllegalStateException(storeName + " lost a key");
    return Arrays.stream(nanosPerOp).average().orElseThrow();
  }

  /// Child mode: measures one store on each workload and prints "workload,store,median,min,max".
  static void measureStore(String store, List<String> workloads, int n, int reps)
      throws InterruptedException {
    int[][] pattern = accessPattern(Math.max(1 << 21, n)); // 2^21 > WARMUP_OPS.
    String[] keys = new String[KEYS]; // "SYM0000" ... "SYM9999"
    for (int i = 0; i < KEYS; i++) keys[i] = String.format("SYM%04d", i);
    for (String workload : workloads) {
      // JIT warm-up, untimed: at least 2 repetitions and WARMUP_OPS ops per lane in all.
      int warmups = Math.max(2, (WARMUP_OPS + n - 1) / n);
      for (int i = 0; i < warmups; i++)
        repetition(store, workload, Math.min(n, WARMUP_OPS), pattern, keys);
      double[] samples = new double[reps];
      for (int i = 0; i < reps; i++) {
        System.gc(); // Collect the previous stores outside the timing.
        samples[i] = repetition(store, workload, n, pattern, keys);
      }
      Arrays.sort(samples);
      double median = (samples[(reps - 1) / 2] + samples[reps / 2]) / 2;
      System.out.printf(Locale.ROOT, "%s,%s,%.1f,%.1f,%.1f%n",
          workload, store, median, samples[0], samples[reps - 1]);
    }
  }

  /// Runs measureStore for one store in a new JVM with this JVM's options; returns its rows.
  static List<String> inChildJvm(String store, List<String> workloads, int n, int reps)
      throws Exception {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
    command.addAll(List.of("-cp", System.getProperty("java.class.path"), "SideBySide",
        String.valueOf(n), String.valueOf(reps), "--workloads", String.join(",", workloads),
        "--child", store));
    Process child = new ProcessBuilder(command).redirectError(Redirect.INHERIT).start();
    List<String> rows = new ArrayList<>();
    try (BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream()))) {
      for (String line; (line = out.readLine()) != null; rows.add(line)) System.err.println(line);
    }
    if (child.waitFor() != 0) throw new IllegalStateException("measuring " + store + " failed");
    return rows;
  }

  /// Parses a comma-separated subset of `all`, keeping the canonical order.
  static List<String> subset(String text, List<String> all, String option) {
    List<String> chosen = Arrays.asList(text.split(","));
    for (String name : chosen)
      if (!all.contains(name)) throw new IllegalArgumentException(option + ": unknown " + name);
    return all.stream().filter(chosen::contains).toList();
  }

  public static void main(String[] args) throws Exception {
    int n = 2_000_000, reps = 5, positional = 0;
    boolean csv = false;
    List<String> workloads = WORKLOADS, stores = STORES;
    String child = null;
    Deque<String> rest = new ArrayDeque<>(); // "--stores=a,b" becomes "--stores", "a,b".
    for (String arg : args) rest.addAll(Arrays.asList(arg.split("=", 2)));
    while (!rest.isEmpty()) {
      String arg = rest.pop();
      switch (arg) {
        case "--csv" -> csv = true;
        case "--workloads" -> workloads = subset(rest.pop(), WORKLOADS, arg);
        case "--stores" -> stores = subset(rest.pop(), STORES, arg);
        case "--child" -> child = rest.pop();
        default -> {
          if (!arg.matches("[1-9][0-9]*") || positional == 2) throw new IllegalArgumentException(
              "usage: SideBySide [OPS] [REPETITIONS] [--csv] [--workloads LIST] [--stores LIST]");
          if (positional++ == 0) n = Integer.parseInt(arg); else reps = Integer.parseInt(arg);
        }
      }
    }
    if (child != null) { measureStore(child, workloads, n, reps); return; }

    List<String[]> rows = new ArrayList<>();
    for (String store : stores) {
      System.err.println("measuring " + store + " (" + String.join(",", workloads) + ")");
      for (String row : inChildJvm(store, workloads, n, reps)) rows.add(row.split(","));
    }
    // By workload, then store, as in the Swift report (the sort is stable; stores came in order).
    rows.sort(Comparator.comparingInt(r -> WORKLOADS.indexOf(r[0])));
    if (csv) {
      System.out.println("workload,store,median_ns_per_op,min_ns_per_op,max_ns_per_op");
    } else {
      System.out.printf("- JVM: %s %s, Caffeine %s, %d cores%n", System.getProperty("java.vm.name"),
          System.getProperty("java.version"), System.getProperty("caffeine.version", "(unknown)"),
          Runtime.getRuntime().availableProcessors());
      System.out.printf("- %d ops per lane, %d repetitions per cell, median reported%n%n", n, reps);
      System.out.println("| workload | store | ns/op per thread (median) | min | max |");
      System.out.println("|---|---|---:|---:|---:|");
    }
    for (String[] r : rows)
      System.out.println(csv ? String.join(",", r) : "| " + String.join(" | ", r) + " |");
  }
}
