// A Curator LeaderLatch participant: the `curator` baseline of `elect compare`
// and the other side of elect's interop tests.
//
// Usage: java LatchDriver <connect string> <latch path> <id> [<session ms> [session]]
// Prints "LEADER" when it leads and "NOT_LEADER" when it stops; with
// LATCH_SEES=1 also "SEES <id>" whenever the leader it sees changes, read
// every 20 ms (the interop tests ask: about 100 reads a second, which
// are this driver's and not Curator's, so compare and the soak go
// without). The session timeout defaults to
// 2000 ms; "session" selects SessionConnectionStateErrorPolicy (leadership
// is kept through SUSPENDED until LOST) instead of Curator's default
// (given up on SUSPENDED). SIGTERM closes the latch (deleting its znode)
// and the client.
// LATCH_DIGEST=user:password authenticates with ZooKeeper's digest scheme.
// SOAK_WRITE=<bash script> (elect lab soak) runs `bash -c "$SOAK_WRITE"
// soak-writer` in a session of its own while leading, with the latch
// znode's creation zxid as ELECT_FENCING_TOKEN, and kills it on NOT_LEADER,
// as users run leader-only work beside a latch.

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.state.SessionConnectionStateErrorPolicy;
import org.apache.curator.retry.RetryOneTime;

public class LatchDriver {
    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1], id = args[2];
        int sessionMs = args.length > 3 ? Integer.parseInt(args[3]) : 2000;
        CuratorFrameworkFactory.Builder builder = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(2000)
                .retryPolicy(new RetryOneTime(100));
        if (args.length > 4 && args[4].equals("session")) {
            builder = builder.connectionStateErrorPolicy(new SessionConnectionStateErrorPolicy());
        }
        String digest = System.getenv("LATCH_DIGEST");
        if (digest != null && !digest.isEmpty()) {
            builder = builder.authorization("digest", digest.getBytes("UTF-8"));
        }
        CuratorFramework client = builder.build();
        client.start();
        LeaderLatch latch = new LeaderLatch(client, path, id);
        String work = System.getenv("SOAK_WRITE");
        latch.addListener(new LeaderLatchListener() {
            public void isLeader() {
                say("LEADER");
                if (work != null) {
                    // Off the listener's thread: it must not wait on ZooKeeper.
                    new Thread(() -> startWork(client, latch, work)).start();
                }
            }
            public void notLeader() {
                stopWork();
                say("NOT_LEADER");
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                stopWork();
                latch.close();
            } catch (Exception e) {
                say("CLOSE_FAILED " + e);
            }
            client.close();
        }));
        latch.start();
        if (!"1".equals(System.getenv("LATCH_SEES"))) {
            Thread.currentThread().join();
        }
        String seen = "";
        while (true) {
            try {
                String leader = latch.getLeader().getId();
                if (!leader.equals(seen)) {
                    seen = leader;
                    say("SEES " + leader);
                }
            } catch (Exception e) {
                // No participant yet, or a transient connection problem.
            }
            Thread.sleep(20);
        }
    }

    static Process writer;

    static void startWork(CuratorFramework client, LeaderLatch latch, String work) {
        try {
            long token = client.checkExists().forPath(latch.getOurPath()).getCzxid();
            synchronized (LatchDriver.class) {
                if (!latch.hasLeadership() || writer != null) {
                    return;
                }
                ProcessBuilder pb = new ProcessBuilder("setsid", "bash", "-c", work, "soak-writer");
                pb.environment().put("ELECT_FENCING_TOKEN", Long.toString(token));
                pb.redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD);
                writer = pb.start();
            }
        } catch (Exception e) {
            say("WORK_FAILED " + e);
        }
    }

    static synchronized void stopWork() {
        if (writer != null) {
            writer.destroyForcibly();
            try {
                writer.waitFor();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            writer = null;
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
