package io.hmsproxy.testbed;

import java.io.IOException;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.security.UserGroupInformation;

/** The rule of the test bed: tables named secret_* are admin's alone. */
final class Secret {
  private Secret() {}

  /**
   * The caller: with hive.metastore.execute.setugi on an unsecured
   * metastore, HMS runs each call as the set_ugi user.
   */
  static String caller() throws MetaException {
    try {
      return UserGroupInformation.getCurrentUser().getShortUserName();
    } catch (IOException e) {
      throw new MetaException("filterhook: no current user: " + e);
    }
  }

  static boolean hidden(String table) throws MetaException {
    return table != null && table.toLowerCase().startsWith("secret_") && !"admin".equals(caller());
  }
}
