package redhold.compat;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RAtomicLong;
import org.redisson.api.RLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * Drives the real Redisson client for redhold's compat suite.
 *
 * <p>Usage: {@code java -jar redhold-compat-driver.jar (--single URL | --cluster URL,URL,...
 * | --sentinel URL,... --master NAME) --watchdog MS}. Prints
 * {@code ready <redisson-id> fenced=true|false} once connected (whether this Redisson release
 * has {@code RFencedLock}: 3.19 and later), then reads one command a line on stdin:
 *
 * <pre>
 *   ID SLOT OP ARGS...        ID ok START_US END_US [DATA...]   or   ID err MESSAGE
 * </pre>
 *
 * <p>Every slot is a named Java thread of its own, created on first use; a slot runs its
 * commands in order, so a {@code lock} that waits blocks its slot, never the command loop,
 * and is answered once acquired. Reentrancy is per slot thread, as in real use. START_US and
 * END_US are the wall-clock times (microseconds since the epoch) just before and just after
 * the Redisson call, so the other side can time a wake-up from the moment the unlock began.
 *
 * <p>One source builds against every Redisson release the suite runs (3.17 and later, see
 * pom.xml): what older releases lack is reached by reflection, and a command that needs it
 * answers {@code err NotInThisVersion: ...}.
 *
 * <p>Kinds: {@code plain} (RLock), {@code fair} (RFairLock), {@code read} and {@code write}
 * (RReadWriteLock), {@code fenced} (RFencedLock), {@code multi} (RedissonMultiLock over the
 * plain locks named in NAME, comma separated). Lease and wait times are milliseconds; a
 * lease of -1 or none means the watchdog keeps the lock alive.
 *
 * <pre>
 *   lock KIND NAME [LEASE]                 -> [TOKEN]           (waits)
 *   try-lock KIND NAME WAIT [LEASE]        -> true [TOKEN] | false
 *   unlock KIND NAME                       ->
 *   force-unlock KIND NAME                 -> true | false
 *   hold-count KIND NAME                   -> N
 *   is-locked KIND NAME                    -> true | false
 *   held-by-thread KIND NAME THREAD-ID     -> true | false      (isHeldByThread: the field
 *                                             redisson-id:THREAD-ID, this client's id)
 *   token NAME                             -> the fenced lock's current token
 *   field                                  -> this slot's holder field, id:thread-id
 *   section KIND NAME LABEL LIST HOLD      -> lock; RPUSH LIST LABEL; sleep HOLD; unlock
 *   hammer KIND NAME N PREFIX              -> VIOLATIONS SECTIONS MAX-WAIT-US MEDIAN-WAIT-US
 *                                             TIMES [FIRST-VIOLATION]
 *   loop KIND NAME N DEPTH HOLD            -> N times: lock DEPTH times, sleep HOLD, unlock DEPTH
 *                                             times (benches/count_commands.py counts these)
 *   ID - exit                              -> shuts Redisson down and exits
 * </pre>
 *
 * <p>Synchronizers (RSemaphore, RCountDownLatch); permits taken stay taken until a
 * {@code sem-release}, from either side:
 *
 * <pre>
 *   sem-try-set NAME N                     -> true | false
 *   sem-acquire NAME N                     ->                   (waits)
 *   sem-release NAME N                     ->
 *   sem-available NAME                     -> N
 *   sem-hammer NAME N PERMITS PREFIX       -> VIOLATIONS ROUNDS MOST-INSIDE
 *   latch-try-set NAME N                   -> true | false
 *   latch-count-down NAME                  ->
 *   latch-count NAME                       -> N
 *   latch-await NAME                       ->                   (waits)
 *   pes-try-set NAME N                     -> true | false      (RPermitExpirableSemaphore)
 *   pes-acquire NAME LEASE                 -> ID                (waits)
 *   pes-release NAME ID                    -> true | false
 *   pes-available NAME                     -> N
 * </pre>
 */
public final class Driver {
    private final RedissonClient redisson;
    private final PrintStream out;
    private final Map<String, ExecutorService> slots = new ConcurrentHashMap<>();

    private Driver(RedissonClient redisson, PrintStream out) {
        this.redisson = redisson;
        this.out = out;
    }

    public static void main(String[] args) throws IOException {
        String single = null;
        String cluster = null;
        String sentinel = null;
        String master = null;
        long watchdog = 30_000;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--single" -> single = args[i + 1];
                case "--cluster" -> cluster = args[i + 1];
                case "--sentinel" -> sentinel = args[i + 1];
                case "--master" -> master = args[i + 1];
                case "--watchdog" -> watchdog = Long.parseLong(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if ((single != null ? 1 : 0) + (cluster != null ? 1 : 0) + (sentinel != null ? 1 : 0) != 1) {
            throw new IllegalArgumentException(
                    "give exactly one of --single URL, --cluster URL,URL,..., --sentinel URL,...");
        }
        Config config = new Config();
        config.setLockWatchdogTimeout(watchdog);
        // A test driver on a small machine: few threads, few idle connections.
        config.setThreads(4);
        config.setNettyThreads(8);
        if (single != null) {
            config.useSingleServer()
                    .setAddress(single)
                    .setConnectionMinimumIdleSize(4)
                    .setSubscriptionConnectionMinimumIdleSize(1);
        } else if (sentinel != null) {
            // One sentinel and no replica: Redisson's check for at least two
            // sentinels is off, and it reads and subscribes on the master (its
            // defaults would pick a replica, and fall back to the master).
            config.useSentinelServers()
                    .addSentinelAddress(sentinel.split(","))
                    .setMasterName(master)
                    .setCheckSentinelsList(false)
                    .setReadMode(org.redisson.config.ReadMode.MASTER)
                    .setSubscriptionMode(org.redisson.config.SubscriptionMode.MASTER)
                    .setMasterConnectionMinimumIdleSize(4)
                    .setSubscriptionConnectionMinimumIdleSize(1);
        } else {
            // Everything else, the sharded subscription mode (AUTO) included, stays
            // Redisson's default: that is what the suite checks against.
            config.useClusterServers()
                    .addNodeAddress(cluster.split(","))
                    .setMasterConnectionMinimumIdleSize(4)
                    .setSubscriptionConnectionMinimumIdleSize(1);
        }
        RedissonClient redisson = Redisson.create(config);
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        Driver driver = new Driver(redisson, out);
        driver.reply("ready " + redisson.getId() + " fenced=" + (FENCED != null));
        driver.loop(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)));
    }

    private void loop(BufferedReader in) throws IOException {
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            if (words.length < 3) {
                reply((words.length > 0 ? words[0] : "?") + " err expected: ID SLOT OP ARGS...");
                continue;
            }
            String id = words[0];
            if (words[2].equals("exit")) {
                redisson.shutdown(0, 2, TimeUnit.SECONDS);
                reply(id + " ok 0 0");
                System.exit(0);
            }
            String[] command = java.util.Arrays.copyOfRange(words, 2, words.length);
            slot(words[1]).execute(() -> run(id, command));
        }
        // stdin closed: the suite is gone, so are we (locks expire on their own).
        System.exit(0);
    }

    private ExecutorService slot(String name) {
        return slots.computeIfAbsent(name, n -> Executors.newSingleThreadExecutor(task -> {
            Thread thread = new Thread(task, "slot-" + n);
            thread.setDaemon(true);
            return thread;
        }));
    }

    private void run(String id, String[] command) {
        long start = micros();
        try {
            String data = execute(command);
            long end = micros();
            reply(id + " ok " + start + " " + end + (data.isEmpty() ? "" : " " + data));
        } catch (Throwable e) {
            String message = (e.getClass().getSimpleName() + ": " + e.getMessage()).replace('\n', ' ');
            reply(id + " err " + message);
        }
    }

    private synchronized void reply(String line) {
        out.println(line);
        out.flush();
    }

    private static long micros() {
        return ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
    }

    private static long lease(String[] command, int index) {
        return command.length > index ? Long.parseLong(command[index]) : -1;
    }

    private String execute(String[] c) throws InterruptedException {
        switch (c[0]) {
            case "field":
                return redisson.getId() + ":" + Thread.currentThread().getId();
            case "token":
                return String.valueOf(fenced(c[1], "getToken", new Class<?>[0]));
            case "section":
                section(c[1], c[2], c[3], c[4], Long.parseLong(c[5]));
                return "";
            case "hammer":
                return hammer(c[1], c[2], Integer.parseInt(c[3]), c[4]);
            case "loop":
                loop(c[1], c[2], Integer.parseInt(c[3]), Integer.parseInt(c[4]), Long.parseLong(c[5]));
                return "";
            default:
                if (c[0].startsWith("sem-") || c[0].startsWith("latch-") || c[0].startsWith("pes-")) {
                    return synchronizer(c);
                }
                break;
        }
        String kind = c[1];
        RLock lock = lock(kind, c[2]);
        switch (c[0]) {
            case "lock": {
                long lease = lease(c, 3);
                if (kind.equals("fenced")) {
                    Object token = lease > 0
                            ? fenced(c[2], "lockAndGetToken", new Class<?>[] {long.class, TimeUnit.class},
                                    lease, TimeUnit.MILLISECONDS)
                            : fenced(c[2], "lockAndGetToken", new Class<?>[0]);
                    return String.valueOf(token);
                }
                if (lease > 0) {
                    lock.lock(lease, TimeUnit.MILLISECONDS);
                } else {
                    lock.lock();
                }
                return "";
            }
            case "try-lock": {
                long wait = Long.parseLong(c[3]);
                long lease = lease(c, 4);
                if (kind.equals("fenced")) {
                    Long token = (Long) fenced(c[2], "tryLockAndGetToken",
                            new Class<?>[] {long.class, long.class, TimeUnit.class},
                            wait, lease, TimeUnit.MILLISECONDS);
                    return token == null || token < 0 ? "false" : "true " + token;
                }
                return String.valueOf(lock.tryLock(wait, lease, TimeUnit.MILLISECONDS));
            }
            case "unlock":
                lock.unlock();
                return "";
            case "force-unlock":
                return String.valueOf(lock.forceUnlock());
            case "hold-count":
                return String.valueOf(lock.getHoldCount());
            case "is-locked":
                return String.valueOf(lock.isLocked());
            case "held-by-thread":
                return String.valueOf(lock.isHeldByThread(Long.parseLong(c[3])));
            default:
                throw new IllegalArgumentException("unknown op " + c[0]);
        }
    }

    private String synchronizer(String[] c) throws InterruptedException {
        switch (c[0]) {
            case "sem-try-set":
                return String.valueOf(redisson.getSemaphore(c[1]).trySetPermits(Integer.parseInt(c[2])));
            case "sem-acquire":
                redisson.getSemaphore(c[1]).acquire(Integer.parseInt(c[2]));
                return "";
            case "sem-release":
                redisson.getSemaphore(c[1]).release(Integer.parseInt(c[2]));
                return "";
            case "sem-available":
                return String.valueOf(redisson.getSemaphore(c[1]).availablePermits());
            case "sem-hammer":
                return semHammer(c[1], Integer.parseInt(c[2]), Integer.parseInt(c[3]), c[4]);
            case "latch-try-set":
                return String.valueOf(redisson.getCountDownLatch(c[1]).trySetCount(Long.parseLong(c[2])));
            case "latch-count-down":
                redisson.getCountDownLatch(c[1]).countDown();
                return "";
            case "latch-count":
                return String.valueOf(redisson.getCountDownLatch(c[1]).getCount());
            case "latch-await":
                redisson.getCountDownLatch(c[1]).await();
                return "";
            case "pes-try-set":
                return String.valueOf(
                        redisson.getPermitExpirableSemaphore(c[1]).trySetPermits(Integer.parseInt(c[2])));
            case "pes-acquire":
                return redisson.getPermitExpirableSemaphore(c[1])
                        .acquire(Long.parseLong(c[2]), TimeUnit.MILLISECONDS);
            case "pes-release":
                return String.valueOf(redisson.getPermitExpirableSemaphore(c[1]).tryRelease(c[2]));
            case "pes-available":
                return String.valueOf(redisson.getPermitExpirableSemaphore(c[1]).availablePermits());
            default:
                throw new IllegalArgumentException("unknown op " + c[0]);
        }
    }

    /**
     * Takes a permit {@code n} times, each time counting itself in {@code PREFIX:inside}
     * (an RAtomicLong, which redhold's side increments the same way) for a moment: the count
     * must never pass {@code permits}. Replies the violations, the rounds and the most seen.
     */
    private String semHammer(String name, int n, int permits, String prefix)
            throws InterruptedException {
        RSemaphore semaphore = redisson.getSemaphore(name);
        RAtomicLong inside = redisson.getAtomicLong(prefix + ":inside");
        int violations = 0;
        long most = 0;
        for (int i = 0; i < n; i++) {
            semaphore.acquire();
            try {
                long now = inside.incrementAndGet();
                most = Math.max(most, now);
                if (now > permits) {
                    violations++;
                }
                Thread.sleep(1);
                inside.decrementAndGet();
            } finally {
                semaphore.release();
            }
        }
        return violations + " " + n + " " + most;
    }

    /** {@code RFencedLock}, or null in a release that has none (before 3.19). */
    private static final Class<?> FENCED = classOrNull("org.redisson.api.RFencedLock");

    private static Class<?> classOrNull(String name) {
        try {
            return Class.forName(name);
        } catch (ClassNotFoundException e) {
            return null;
        }
    }

    /** What a command that needs something this Redisson release lacks throws. */
    static final class NotInThisVersion extends RuntimeException {
        NotInThisVersion(String what) {
            super(what + " is not in this Redisson version");
        }
    }

    /** {@code redisson.getFencedLock(name)}, through reflection (see the class comment). */
    private Object fencedLock(String name) {
        if (FENCED == null) {
            throw new NotInThisVersion("RFencedLock");
        }
        return invoke(redisson, "getFencedLock", new Class<?>[] {String.class}, name);
    }

    /** Calls {@code method} on the fenced lock {@code name}. */
    private Object fenced(String name, String method, Class<?>[] types, Object... args) {
        return invoke(fencedLock(name), method, types, args);
    }

    /**
     * Calls the public method {@code name(types)} on {@code target}, looked up on the public
     * interfaces it implements first (an implementing class need not be public), unwrapping
     * what the method throws.
     */
    private static Object invoke(Object target, String name, Class<?>[] types, Object... args) {
        List<Class<?>> owners = new ArrayList<>();
        for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
            owners.addAll(Arrays.asList(c.getInterfaces()));
        }
        owners.add(target.getClass());
        for (Class<?> owner : owners) {
            Method method;
            try {
                method = owner.getMethod(name, types);
            } catch (NoSuchMethodException e) {
                continue;
            }
            try {
                return method.invoke(target, args);
            } catch (InvocationTargetException e) {
                if (e.getCause() instanceof RuntimeException r) {
                    throw r;
                }
                throw new IllegalStateException(e.getCause());
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }
        throw new NotInThisVersion(target.getClass().getSimpleName() + "." + name);
    }

    private RLock lock(String kind, String name) {
        return switch (kind) {
            case "plain" -> redisson.getLock(name);
            case "fair" -> redisson.getFairLock(name);
            case "read" -> redisson.getReadWriteLock(name).readLock();
            case "write" -> redisson.getReadWriteLock(name).writeLock();
            case "fenced" -> (RLock) fencedLock(name);
            case "multi" -> {
                List<RLock> locks = new ArrayList<>();
                for (String part : name.split(",")) {
                    locks.add(redisson.getLock(part));
                }
                yield redisson.getMultiLock(locks.toArray(new RLock[0]));
            }
            default -> throw new IllegalArgumentException("unknown kind " + kind);
        };
    }

    /** Critical sections and nothing else, so that the commands they send can be counted. */
    private void loop(String kind, String name, int n, int depth, long holdMs)
            throws InterruptedException {
        RLock lock = lock(kind, name);
        for (int i = 0; i < n; i++) {
            for (int d = 0; d < depth; d++) {
                lock.lock();
            }
            if (holdMs > 0) {
                Thread.sleep(holdMs);
            }
            for (int d = 0; d < depth; d++) {
                lock.unlock();
            }
        }
    }

    private void section(String kind, String name, String label, String list, long holdMs)
            throws InterruptedException {
        RLock lock = lock(kind, name);
        lock.lock();
        try {
            redisson.getList(list, StringCodec.INSTANCE).add(label);
            Thread.sleep(holdMs);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Runs {@code n} critical sections under the lock, checking exclusion through counters
     * that redhold's side of the suite updates the same way (see compat/runner): every third
     * section re-enters the lock and checks its hold count. Each section's wait, from the
     * call that takes the lock to its return (re-entries not counted), is timed: the reply
     * carries the longest and the median, in microseconds, and TIMES, every section's
     * {@code ASKED_US:TOOK_US:HELD_US} (the call, wall clock in microseconds since the epoch;
     * the wait; from holding the lock until the unlock returned) joined by commas.
     */
    private String hammer(String kind, String name, int n, String prefix) {
        RLock lock = lock(kind, name);
        RAtomicLong inside = redisson.getAtomicLong(prefix + ":inside");
        RAtomicLong readers = redisson.getAtomicLong(prefix + ":readers");
        RAtomicLong counter = redisson.getAtomicLong(prefix + ":counter");
        RAtomicLong lastToken = redisson.getAtomicLong(prefix + ":token");
        int violations = 0;
        String first = "";
        long[] waits = new long[n];
        StringBuilder times = new StringBuilder();
        for (int i = 0; i < n; i++) {
            Long token = null;
            long askedUs = micros();
            long asked = System.nanoTime();
            if (kind.equals("fenced")) {
                token = (Long) fenced(name, "lockAndGetToken", new Class<?>[0]);
            } else {
                lock.lock();
            }
            long got = System.nanoTime();
            waits[i] = (got - asked) / 1_000;
            String problem = null;
            try {
                if (i % 3 == 2) {
                    lock.lock();
                    // A multi-lock has no hold count of its own (Redisson throws).
                    int holds = kind.equals("multi") ? 2 : lock.getHoldCount();
                    lock.unlock();
                    if (holds != 2) {
                        problem = "hold count " + holds + " after re-entry";
                    }
                }
                if (kind.equals("read")) {
                    readers.incrementAndGet();
                    long writers = inside.get();
                    if (writers != 0) {
                        problem = "a reader saw " + writers + " writer(s) inside";
                    }
                    readers.decrementAndGet();
                } else {
                    long now = inside.incrementAndGet();
                    if (now != 1) {
                        problem = now + " holders inside at once";
                    }
                    if (kind.equals("write") && readers.get() != 0) {
                        problem = "a writer saw readers inside";
                    }
                    long value = counter.get();
                    Thread.yield();
                    counter.set(value + 1);
                    if (token != null) {
                        long last = lastToken.get();
                        if (token <= last) {
                            problem = "token " + token + " after token " + last;
                        }
                        lastToken.set(token);
                    }
                    inside.decrementAndGet();
                }
            } finally {
                lock.unlock();
                long held = (System.nanoTime() - got) / 1_000;
                times.append(i == 0 ? "" : ",").append(askedUs).append(':').append(waits[i])
                        .append(':').append(held);
            }
            if (problem != null) {
                violations++;
                if (first.isEmpty()) {
                    first = problem.replace(' ', '_');
                }
            }
        }
        Arrays.sort(waits);
        long longest = n == 0 ? 0 : waits[n - 1];
        long median = n == 0 ? 0 : waits[n / 2];
        return violations + " " + n + " " + longest + " " + median + " " + (n == 0 ? "-" : times)
                + (first.isEmpty() ? "" : " " + first);
    }
}
