package io.hmsproxy.testbed;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import org.apache.atlas.model.instance.AtlasEntity;
import org.apache.atlas.model.instance.AtlasObjectId;
import org.apache.atlas.model.notification.HookNotification;
import org.apache.atlas.model.notification.HookNotification.EntityCreateRequestV2;
import org.apache.atlas.model.notification.HookNotification.EntityDeleteRequestV2;
import org.apache.atlas.model.notification.HookNotification.EntityPartialUpdateRequestV2;
import org.apache.atlas.notification.hook.HookMessageDeserializer;

/**
 * Deserialises each line of a file as an Atlas hook notification with
 * Atlas's own HookMessageDeserializer (what Atlas's hook consumer runs on
 * every message of ATLAS_HOOK), and prints one line per entity:
 *
 *   CREATE typeName qualifiedName
 *   UPDATE typeName oldQualifiedName newQualifiedName
 *   DELETE typeName qualifiedName
 *
 * A message Atlas cannot read, or of another type, exits with status 1.
 */
public final class AtlasReader {
  public static void main(String[] args) throws Exception {
    HookMessageDeserializer d = new HookMessageDeserializer();
    List<String> lines = Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8);
    int n = 0;
    for (String line : lines) {
      if (line.isBlank()) {
        continue;
      }
      n++;
      HookNotification h = d.deserialize(line);
      if (h == null) {
        fail(n, "deserialised to null", line);
      }
      String user = h.getUser();
      if (h instanceof EntityCreateRequestV2 c) {
        for (AtlasEntity e : c.getEntities().getEntities()) {
          print("CREATE", e, null, user);
        }
        Map<String, AtlasEntity> refs = c.getEntities().getReferredEntities();
        if (refs != null) {
          for (AtlasEntity e : refs.values()) {
            print("CREATE", e, null, user);
          }
        }
      } else if (h instanceof EntityPartialUpdateRequestV2 u) {
        print("UPDATE", u.getEntity().getEntity(), u.getEntityId(), user);
      } else if (h instanceof EntityDeleteRequestV2 del) {
        for (AtlasObjectId id : del.getEntities()) {
          System.out.println("DELETE " + id.getTypeName() + " " + id.getUniqueAttributes().get("qualifiedName") + " " + user);
        }
      } else {
        fail(n, "unexpected notification " + h.getClass().getName() + " type " + h.getType(), line);
      }
    }
    System.err.println("atlasreader: " + n + " messages read");
  }

  private static void print(String op, AtlasEntity e, AtlasObjectId old, String user) {
    Object qn = e.getAttribute("qualifiedName");
    if (old != null) {
      System.out.println(op + " " + e.getTypeName() + " " + old.getUniqueAttributes().get("qualifiedName") + " " + qn + " " + user);
    } else {
      System.out.println(op + " " + e.getTypeName() + " " + qn + " " + user);
    }
  }

  private static void fail(int n, String why, String line) {
    System.err.println("atlasreader: message " + n + ": " + why + ": " + line);
    System.exit(1);
  }
}
