// A CPU- and allocation-heavy program for the JFR end-to-end test:
// burnCpu() spins on arithmetic, allocate() makes many short-lived arrays,
// contend() blocks on a monitor another thread holds (jdk.JavaMonitorEnter)
// and parks (jdk.ThreadPark), each past settings=profile's 10 ms threshold.
// Run: java -XX:StartFlightRecording=filename=out.jfr,settings=profile Hot SECONDS
public class Hot {
    static volatile long sink;
    static volatile Object keep;

    static long burnCpu(long n) {
        long x = 0;
        for (long i = 0; i < n; i++) {
            x += (i * 2654435761L) ^ (x >>> 7);
        }
        return x;
    }

    static void allocate(int n) {
        for (int i = 0; i < n; i++) {
            keep = new byte[4096 + (i & 1023)];
        }
    }

    static final Object lock = new Object();

    static void contend() throws InterruptedException {
        Thread holder = new Thread(() -> {
            synchronized (lock) {
                try {
                    Thread.sleep(40);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        holder.start();
        Thread.sleep(5);
        synchronized (lock) {
            sink++;
        }
        holder.join();
        java.util.concurrent.locks.LockSupport.parkNanos(25_000_000L);
    }

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 3;
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        while (System.nanoTime() < end) {
            sink += burnCpu(20_000_000L);
            allocate(3_000);
            contend();
        }
    }
}
